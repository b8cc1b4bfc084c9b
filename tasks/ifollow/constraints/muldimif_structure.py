"""MulDimIF structure checks: Markdown headings and block quotes, table limits, list items, JSON
nesting and XML attributes (the ``muldimif:markdown:*``, ``table:*``, ``list:*``, ``json:*`` and
``xml:*`` types). Shared conventions are in :mod:`muldimif_checks`; the text readers and their
decisions in :mod:`muldimif_text`.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.ifollow.constraints import muldimif_text as mt
from tasks.ifollow.constraints.base import CheckResult
from tasks.ifollow.constraints.muldimif_checks import bound_phrase, constraint, within


# -- Markdown --------------------------------------------------------------------------------------
def _heading_rule(response: str, each: bool, rule) -> CheckResult:
    """MulDimIF: with ``each`` ("each"/"any" in the text) every heading must satisfy the rule on its
    own; headings are :func:`muldimif_text.md_headings`."""
    found = mt.md_headings(response)
    if each:
        if not found:
            return CheckResult(False, "no heading", [])
        bad = [h for h in found if not rule([h])]
        return CheckResult(not bad, f"{len(bad)} of {len(found)} headings fail", [])
    return CheckResult(rule(found), f"heading levels {[lv for lv, _ in found]}", [])


def _each_text(kw: dict[str, Any]) -> str:
    return " (every heading)" if kw.get("each") else ""


@constraint("muldimif:markdown:heading_level", ("level", "each"),
            lambda kw: f"The response must include a level {kw['level']} heading{_each_text(kw)}.", required=("level",))
def heading_level(response: str, level: int, each: bool = False) -> CheckResult:
    """Some heading has exactly this level (with ``each``: every heading has it)."""
    return _heading_rule(response, each, lambda hs: any(lv == int(level) for lv, _ in hs))


@constraint("muldimif:markdown:heading_titled", ("level", "title", "each"),
            lambda kw: f"The response must include a level {kw['level']} heading titled '{kw['title']}'.",
            required=("level", "title"))
def heading_titled(response: str, level: int, title: str, each: bool = False) -> CheckResult:
    """A heading of this level whose text is exactly ``title``."""
    return _heading_rule(response, each, lambda hs: any(lv == int(level) and c == title for lv, c in hs))


@constraint("muldimif:markdown:level_count", ("op", "n", "each"),
            lambda kw: f"The response must use {kw['op']} {kw['n']} heading levels.", required=("op", "n"))
def level_count(response: str, op: str, n: int, each: bool = False) -> CheckResult:
    """The number of distinct heading levels is at least / at most / exactly ``n``."""
    def rule(hs: list[tuple[int, str]]) -> bool:
        k = len({lv for lv, _ in hs})
        return k >= int(n) if op == "at least" else k <= int(n) if op == "at most" else k == int(n)

    return _heading_rule(response, each, rule)


@constraint("muldimif:markdown:has_levels", ("levels", "each"),
            lambda kw: "The response must use heading levels " + " and ".join(map(str, kw["levels"])) + ".",
            required=("levels",))
def has_levels(response: str, levels: list[int], each: bool = False) -> CheckResult:
    """Every listed heading level occurs (needs at least one heading)."""
    return _heading_rule(response, each,
                         lambda hs: bool(hs) and {int(x) for x in levels} <= {lv for lv, _ in hs})


@constraint("muldimif:markdown:max_level", ("level", "each"),
            lambda kw: f"Headings must not go deeper than level {kw['level']}.", required=("level",))
def max_level(response: str, level: int, each: bool = False) -> CheckResult:
    """There is a heading and none is deeper than ``level``."""
    return _heading_rule(response, each, lambda hs: bool(hs) and all(lv <= int(level) for lv, _ in hs))


@constraint("muldimif:markdown:headings", ("min", "each"), lambda kw: "The response must be organised under headings.")
def has_headings(response: str, min: int = 1, each: bool = False) -> CheckResult:
    """At least ``min`` headings (default 1)."""
    return _heading_rule(response, each, lambda hs: len(hs) >= int(min))


@constraint("muldimif:markdown:unchecked", ("each", "text"), lambda kw: str(kw.get("text", "")))
def markdown_unchecked(response: str, each: bool = False, text: str = "") -> CheckResult:
    """A Markdown constraint from which MulDimIF's rules read no requirement: it holds (with
    ``each``: as long as there is a heading)."""
    return _heading_rule(response, each, lambda hs: True)


@constraint("muldimif:markdown:block_quotes", ("min",), "The response must use Markdown block quotes.")
def block_quotes(response: str, min: int = 1) -> bool:
    """At least ``min`` non-empty lines start with '>' once stripped."""
    return sum(1 for ln in response.split("\n") if ln.strip().startswith(">")) >= int(min)


def _table_bound(response: str, index: int, lo: Any, hi: Any, required: bool, what: str) -> CheckResult:
    block = mt.pipe_block(response)
    if block is None:
        return CheckResult(not required, "no table" + ("" if required else " (optional)"), [])
    n = block[index]
    return CheckResult(within(n, lo, hi), f"{n} {what}", [])


@constraint("muldimif:table:rows", ("min", "max", "required"),
            lambda kw: ("The response must include a table" if kw.get("required") else "Any table")
            + f" with {bound_phrase(kw, 'rows')}.")
def table_rows(response: str, min: int | None = None, max: int | None = None, required: bool = True) -> CheckResult:
    """Data rows of the '|' block (see :func:`muldimif_text.pipe_block`) within [min, max]; without
    any '|' the constraint holds only when optional ("if a table is used")."""
    return _table_bound(response, 0, min, max, required, "rows")


@constraint("muldimif:table:columns", ("min", "max", "required"),
            lambda kw: ("The response must include a table" if kw.get("required") else "Any table")
            + f" with {bound_phrase(kw, 'columns')}.")
def table_columns(response: str, min: int | None = None, max: int | None = None,
                  required: bool = True) -> CheckResult:
    """Columns of the first line of the '|' block within [min, max]; no '|' holds only when optional."""
    return _table_bound(response, 1, min, max, required, "columns")


@constraint("muldimif:list:items", ("min", "max"),
            lambda kw: f"The list must contain {bound_phrase(kw, 'items')}.")
def list_items(response: str, min: int | None = None, max: int | None = None) -> bool:
    """Items = data rows of the first table if any, else list items (0 when neither) within [min, max]."""
    found = mt.tables(response)
    n = len(found[0].rows) if found else len(mt.list_items(response))
    return within(n, min, max)


@constraint("muldimif:json:nesting", ("min", "max"),
            lambda kw: f"The response must include a JSON object with {bound_phrase(kw, 'levels of nesting')}.")
def json_nesting(response: str, min: int | None = None, max: int | None = None) -> CheckResult:
    """The response's JSON (its first ```json block, else the whole response) parses and its
    nesting depth (:func:`muldimif_text.container_depth`) is within [min, max] (MulDimIF's rule)."""
    value = mt.official_json(response)
    if value is None:
        return CheckResult(False, "no parsable JSON (a ```json block or the whole response)", [])
    depth = mt.container_depth(value)
    return CheckResult(within(depth, min, max), f"nesting depth {depth}", [])


@constraint("muldimif:xml:attributes", ("min", "max"),
            lambda kw: f"Each XML element must have {bound_phrase(kw, 'attributes')}.")
def xml_attributes(response: str, min: int | None = None, max: int | None = None) -> CheckResult:
    """MulDimIF's rule: in the first ```xml block if there is one (else the whole response), every
    XML start tag has between ``min`` and ``max`` attributes; a response with no tag holds."""
    m = re.search(r"```xml(.*?)```", response, re.DOTALL)
    if "```xml" in response and not m:
        return CheckResult(False, "unclosed ```xml block", [])
    counts = mt.xml_attribute_counts(m.group(1) if m else response)
    ok = all(within(c, min, max) for c in counts)
    return CheckResult(ok, f"attribute counts {counts[:20]}", [])
