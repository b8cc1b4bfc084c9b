"""Every algorithm name, the derived ones included, and how to build one from its parameters.

``mrtpo+<name>`` and ``mrtpo-oracle+<name>`` exist for every registered response-level
reweighter, built-in or plugin: they are derived from the registry (:func:`reweighters`), never
listed by hand, and refused when the reweighter declares a parameter the MRTPO base declares too
(the two would silently share one value).
Parameters that were renamed (``Algorithm.renamed``, e.g. OPSD's ``beta`` -> ``jsd_beta``) are
refused under their old name; :func:`upgraded_params` reads records written with the old one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from algorithms.registry import ALGORITHMS
from mrbench_core.registry import UnknownNameError, first_doc_line

#: the MRTPO-family algorithms that compose with a reweighter as ``<base>+<reweighter>``
COMPOSITE_BASES = ("mrtpo", "mrtpo-oracle")

_composed: dict[str, Any] = {}


def reweighters() -> list[str]:
    """Registered names whose class is a response-level reweighter other than MRTPO's own
    aggregator, GDPO (``mrtpo`` itself); imports the algorithms."""
    from algorithms.gdpo import Reweighter
    from algorithms.mrtpo import MRTPO

    def composable(target: Any) -> bool:
        return isinstance(target, type) and issubclass(target, Reweighter) and target is not MRTPO.aggregator_class

    return [n for n in ALGORITHMS.names() if composable(ALGORITHMS.get(n))]


def list_algorithms() -> list[str]:
    """Every algorithm name, the derived ``<base>+<reweighter>`` composites included, sorted."""
    return sorted(ALGORITHMS.names() + [f"{b}+{n}" for b in COMPOSITE_BASES for n in reweighters()])


def shared_keys(reweighter: type, base: type | None = None) -> list[str]:
    """Parameters ``reweighter`` declares that the MRTPO-family ``base`` (default MRTPO) declares too."""
    from algorithms.mrtpo import MRTPO

    own = {f.name for f in dataclasses.fields((base or MRTPO).config_class)}
    return sorted(own & {f.name for f in dataclasses.fields(reweighter.config_class)})


def resolve(name: str) -> Any:
    """The class (or factory) registered as ``name``; composites are built on first use."""
    if name in ALGORITHMS:
        return ALGORITHMS.get(name)
    base, _, inner = name.partition("+")
    if not inner or base not in COMPOSITE_BASES:
        raise UnknownNameError(f"unknown algorithm {name!r}; known algorithms: {', '.join(list_algorithms())}")
    if name not in _composed:
        from algorithms.base import ConfigError
        from algorithms.gdpo import Reweighter
        from algorithms.mrtpo import compose

        target = ALGORITHMS.get(inner) if inner in ALGORITHMS else None
        if not (isinstance(target, type) and issubclass(target, Reweighter)):
            raise UnknownNameError(f"unknown algorithm {name!r}: {inner!r} is not a registered response-level "
                                   f"reweighter; known algorithms: {', '.join(list_algorithms())}")
        base_class = ALGORITHMS.get(base)
        shared = shared_keys(target, base_class)
        if shared:
            raise ConfigError(f"algorithm {name!r}: reweighter {inner!r} declares {', '.join(shared)}, which {base} "
                              f"declares too; one --algo.KEY cannot set both: rename the reweighter's field")
        _composed[name] = compose(target, base_class)
    return _composed[name]


def describe_algorithms() -> list[tuple[str, str]]:
    """(name, description) for every algorithm, composites included."""
    return [(n, ALGORITHMS.description(n) if n in ALGORITHMS else first_doc_line(resolve(n)))
            for n in list_algorithms()]


def get_algorithm(name: str, **config: Any) -> Any:
    """Instantiate algorithm ``name`` with its config keys; unknown names and keys are errors
    that list the known ones, and a renamed key names its new place."""
    return resolve(name)(**config)


def upgraded_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every renamed key (``Algorithm.renamed``) at its new place: how a record
    written before the rename is read."""
    renamed = getattr(resolve(name), "renamed", {}) or {}
    return {renamed.get(k, k): v for k, v in params.items()}
