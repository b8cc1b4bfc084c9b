"""Config fields declared with their help text and allowed values, for every layer.

``setting(default, help=..., ge=..., gt=..., le=..., lt=..., choices=...)`` is a
:func:`dataclasses.field` whose metadata carries a one-line description (what ``mrbench run
--help`` and ``mrbench run --algo NAME --help`` print) and, optionally, bounds or a fixed set of
allowed values. :func:`check_bounds` checks every such field of a dataclass (the run config calls
it from each section's ``__post_init__``, :func:`algorithms.base.build_config` for an algorithm's
parameters) and raises ``error`` with a message naming the field and what it allows:
``sampling.temperature: must be > 0, got 0.0``, ``backend.local.replay_head: must be one of:
model, float32, auto; got 'bogus'``. :func:`range_text` writes the same for ``--help``, so each
range is written once, where the field is declared.

No torch and no harness here: the algorithm configs (``algorithms/``) and the run config
(``harness/config.py``) declare their fields the same way.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))


def setting(default: Any = dataclasses.MISSING, *, help: str, factory: Any = dataclasses.MISSING,
            ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
            choices: tuple[Any, ...] | None = None, why: str = "") -> Any:
    """A dataclass field with its one-line ``help`` (``factory`` for mutable defaults) and optional
    bounds or ``choices``, the values it allows, in the order ``--help`` lists them (``None`` values
    are never checked: they mean "off" or "automatic"); ``why`` is added to the error message of a
    value out of range."""
    bounds = {k: v for k, v in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if v is not None}
    metadata = {"help": help, "bounds": bounds, "choices": tuple(choices) if choices is not None else None,
                "why": why}
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def field_help(f: dataclasses.Field) -> str:
    return str(f.metadata.get("help", ""))


def range_text(f: dataclasses.Field) -> str:
    """The declared range of a field, e.g. ``> 0``, ``>= 0 and <= 1`` or ``one of: padded, exact``;
    empty when it declares none."""
    bounds = f.metadata.get("bounds") or {}
    parts = [f"{sign} {_num(bounds[key])}" for key, sign in _BOUNDS if key in bounds]
    choices = f.metadata.get("choices")
    if choices:
        parts.append("one of: " + ", ".join(str(c) for c in choices))
    return " and ".join(parts)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def out_of_range(value: Any, bounds: dict[str, float]) -> bool:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return True  # NaN and inf: a bounded setting needs a finite value
    return (("gt" in bounds and not value > bounds["gt"]) or ("ge" in bounds and not value >= bounds["ge"])
            or ("lt" in bounds and not value < bounds["lt"]) or ("le" in bounds and not value <= bounds["le"]))


def not_a_choice(value: Any, choices: tuple[Any, ...] | None) -> bool:
    return choices is not None and value is not None and value not in choices


def check_bounds(obj: Any, section: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error`` for the first field of dataclass ``obj`` outside its declared range or
    choices; the message names ``section.field`` (``section`` empty: the field alone), what the field
    allows and the value."""
    for f in dataclasses.fields(obj):
        check_value(f, getattr(obj, f.name), f"{section}.{f.name}" if section else f.name, error)


def check_value(f: dataclasses.Field, value: Any, where: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error`` naming ``where`` when ``value`` is outside what field ``f`` declares."""
    why = f.metadata.get("why")
    because = f" ({why})" if why else ""
    bounds = f.metadata.get("bounds")
    if bounds and out_of_range(value, bounds):
        finite = "a finite number " if isinstance(value, float) and not math.isfinite(value) else ""
        raise error(f"{where}: must be {finite}{range_text(f)}, got {value!r}{because}")
    if not_a_choice(value, f.metadata.get("choices")):
        raise error(f"{where}: must be {range_text(f)}; got {value!r}{because}")
