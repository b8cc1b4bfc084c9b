"""How the report writes a number and what a difference's interval rules out: shared by the
tables (``render``) and the verdict (``verdict``), which ``render`` imports."""

from __future__ import annotations

import math

from harness.report.stats import Comparison

__all__ = ["num", "rules_out_text"]


def num(x: float | None, signed: bool = False) -> str:
    """Three decimals; "—" for an undefined value (None, NaN), "inf"/"-inf" for an infinite one."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = f"{x:+.3f}" if signed else f"{x:.3f}"
    return text if abs(x) < 1000 else (f"{x:+.4g}" if signed else f"{x:.4g}")


def rules_out_text(c: Comparison) -> str:
    """In words, what the difference's 95% interval rules out (empty without an interval)."""
    if not (math.isfinite(c.lo) and math.isfinite(c.hi)):
        return ""
    up = f"gains above {num(c.hi, True)}" if c.hi >= 0 else f"any gain (everything above {num(c.hi, True)})"
    down = f"losses below {num(c.lo, True)}" if c.lo <= 0 else f"any loss (everything below {num(c.lo, True)})"
    return f"rules out {up} and {down}"
