"""Config fields declared with their help text and allowed range, for every layer.

``setting(default, help=..., ge=..., gt=..., le=..., lt=...)`` is a :func:`dataclasses.field`
whose metadata carries a one-line description (what ``mrbench run --help`` and
``mrbench run --algo NAME --help`` print) and, optionally, bounds. :func:`check_bounds`, called
from a dataclass's ``__post_init__``, checks every bounded field and raises ``error`` with a
message naming the field and the allowed range: ``sampling.temperature: must be > 0, got 0.0``.

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
            why: str = "") -> Any:
    """A dataclass field with its one-line ``help`` (``factory`` for mutable defaults) and optional
    bounds (``None`` values are never bounded: they mean "off" or "automatic"); ``why`` is added to
    the error message of a value out of range."""
    bounds = {k: v for k, v in (("gt", gt), ("ge", ge), ("lt", lt), ("le", le)) if v is not None}
    metadata = {"help": help, "bounds": bounds, "why": why}
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def field_help(f: dataclasses.Field) -> str:
    return str(f.metadata.get("help", ""))


def range_text(f: dataclasses.Field) -> str:
    """The declared range of a field, e.g. ``> 0`` or ``>= 0 and <= 1``; empty when unbounded."""
    bounds = f.metadata.get("bounds") or {}
    return " and ".join(f"{sign} {_num(bounds[key])}" for key, sign in _BOUNDS if key in bounds)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def out_of_range(value: Any, bounds: dict[str, float]) -> bool:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return True  # NaN and inf: a bounded setting needs a finite value
    return (("gt" in bounds and not value > bounds["gt"]) or ("ge" in bounds and not value >= bounds["ge"])
            or ("lt" in bounds and not value < bounds["lt"]) or ("le" in bounds and not value <= bounds["le"]))


def check_bounds(obj: Any, section: str, error: type[Exception] = ValueError) -> None:
    """Raise ``error`` for the first field of dataclass ``obj`` outside its declared range; the
    message names ``section.field`` (``section`` empty: the field alone), the range and the value."""
    for f in dataclasses.fields(obj):
        bounds = f.metadata.get("bounds")
        value = getattr(obj, f.name)
        if bounds and out_of_range(value, bounds):
            where = f"{section}.{f.name}" if section else f.name
            why = f.metadata.get("why")
            finite = "a finite number " if isinstance(value, float) and not math.isfinite(value) else ""
            raise error(f"{where}: must be {finite}{range_text(f)}, got {value!r}" + (f" ({why})" if why else ""))
