"""MulDimIF: importing this module registers every ``muldimif:*`` constraint type.

Entry points for the task and the evaluator:

- :func:`constraints_for_row` — a ``test.json`` row -> ``[(constraint id, kwargs), ...]``, one per
  ``[category, subcategory, text]`` triple, in the row's order (errors name the row);
- :func:`check_row` — a response against all of a row's constraints: the per-constraint verdicts,
  and MulDimIF accuracy's unit (a row is correct when every constraint holds);
- :func:`coverage` — how many triples of a data set parse.

All 4,180 constraints of the 1,200-row test set parse (two name no keyword and are reported as
``muldimif:keywords:unstated``; 46 Markdown texts yield no rule under MulDimIF's reading and are
``muldimif:markdown:unchecked``). The parsing rules are in :mod:`muldimif_parse`, the checks in
:mod:`muldimif_checks` and :mod:`muldimif_structure`, the text readers and their decisions in
:mod:`muldimif_text`. Where MulDimIF's official checker has a rule we follow it (word, sentence
and paragraph counts, keyword matching, punctuation units, case rules, table block, Markdown
headings, JSON depth); the deviations are stated where they are made.
"""

from __future__ import annotations

from typing import Any

from tasks.ifollow.constraints.base import CONSTRAINTS, CheckResult, check
from tasks.ifollow.constraints.muldimif_parse import (
    KNOWN_CATEGORIES,
    MulDimIFParseError,
    constraints_for_row,
    coverage,
    parse_constraint,
)

MULDIMIF_IDS: tuple[str, ...] = tuple(n for n in CONSTRAINTS.names() if n.startswith("muldimif:"))


def check_row(row: dict[str, Any], response: str) -> tuple[bool, list[CheckResult]]:
    """(all constraints hold, one strict CheckResult per constraint) for ``response`` on ``row``."""
    results = [check(cid, response, kwargs) for cid, kwargs in constraints_for_row(row)]
    return all(r.ok for r in results), results


__all__ = ["KNOWN_CATEGORIES", "MULDIMIF_IDS", "MulDimIFParseError", "check_row", "constraints_for_row", "coverage",
           "parse_constraint"]
