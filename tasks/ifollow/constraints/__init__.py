"""Constraint types for instruction following, one registry for IFEval, IFBench and MulDimIF ids.

Importing this package registers every family: ``ifeval`` (25 ids), ``ifbench`` (58 ids) and
``muldimif`` (its constraint forms). HIR-16K rows use the first two (type1 and type2). Every
family is required: one that cannot be imported (a missing dependency) fails the import with
the family's name, rather than leaving its constraints unscored.
"""

from __future__ import annotations

import importlib

from tasks.ifollow.constraints.base import (  # noqa: F401  (re-exported)
    CONSTRAINTS,
    CheckResult,
    ConstraintType,
    check,
    clean_kwargs,
    get_constraint,
    known_ids,
    register,
)

#: family -> module registering it
FAMILY_MODULES: dict[str, str] = {
    "ifeval": "tasks.ifollow.constraints.ifeval",
    "ifbench": "tasks.ifollow.constraints.ifbench",
    "muldimif": "tasks.ifollow.constraints.muldimif",
}

for _family, _module in FAMILY_MODULES.items():
    try:
        importlib.import_module(_module)
    except ImportError as _exc:
        raise ImportError(f"constraint family {_family!r} ({_module}) cannot be imported: {_exc}") from _exc


def family_ids(family: str) -> list[str]:
    """Registered ids of one family, sorted (the tests' tables of each family)."""
    return sorted(n for n in CONSTRAINTS.names() if CONSTRAINTS.get(n).family == family)
