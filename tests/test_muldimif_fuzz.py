"""Hypothesis fuzzing: 10,000 (slow-marked; 2,000 by default) arbitrary responses through every MulDimIF checker, no exception.

As for IFBench: the wrapper turns an internal exception into "checker failed ..."; no checker may
reach that branch, verdicts are bools and spans lie inside the response. Keyword arguments are
those the parser produces for real test-set constraints, one per type.
"""

from __future__ import annotations

import pytest
from constraint_fuzz import make_fuzz

from tasks.ifollow.constraints.muldimif import MULDIMIF_IDS

KWARGS = {
    "muldimif:keywords:include": {"keywords": ["fox", "代表"], "scope": "each", "target": "item", "end_period": True},
    "muldimif:keywords:exclude": {"keywords": ["pirated"]},
    "muldimif:keywords:unstated": {"text": "include the names of key players"},
    "muldimif:punctuation:ending": {"marks": [".", "!"], "unit": "cells"},
    "muldimif:identifiers:starts_with": {"prefix": "Example:", "scope": "each"},
    "muldimif:identifiers:name_initial": {"letter": "P"},
    "muldimif:language:capitalized": {"scope": "headings"}, "muldimif:language:chinese": {"variant": "traditional", "mode": "entirely"},
    "muldimif:length:words": {"min": 2, "max": 50, "scope": "each"}, "muldimif:length:sentences": {"min": 1, "max": 5},
    "muldimif:length:characters": {"min": 15, "scope": "each"}, "muldimif:length:paragraphs": {"min": 2},
    "muldimif:format:blurb": {"max_chars": 200}, "muldimif:markdown:heading_level": {"level": 2},
    "muldimif:markdown:level_count": {"op": "exactly", "n": 2, "each": True},
    "muldimif:markdown:heading_titled": {"level": 2, "title": "A"}, "muldimif:markdown:unchecked": {"each": True}, "muldimif:markdown:has_levels": {"levels": [1, 2]},
    "muldimif:markdown:max_level": {"level": 2}, "muldimif:table:rows": {"max": 3, "required": True},
    "muldimif:table:columns": {"min": 2, "max": 3, "required": False}, "muldimif:list:items": {"max": 5},
    "muldimif:json:nesting": {"min": 2}, "muldimif:xml:attributes": {"min": 1, "max": 3},
}

FRAGMENTS = ["\n", "\n\n", "# ", "## ", "### ", "- ", "* ", "1. ", "> ", "|", "| a | b |\n", "|---|---|\n", "```", "`",
             "{", "}", '"k": ', "[", "]", ":", ",", "<a x=\"1\">", "</a>", "<b/>", ". ", "! ", "。", "代表", "這",
             "这", "Example:", "fox", "Fox", "P", "é", "😀", "\r", "\u00a0"]

# 2,000 responses in the default suite (~12 s); the full 10,000 (~60 s on a shared 2-core machine) is slow-marked.
test_every_muldimif_checker_survives_arbitrary_responses_2000 = make_fuzz(MULDIMIF_IDS, KWARGS, FRAGMENTS, 2_000)
test_every_muldimif_checker_survives_arbitrary_responses_10000 = pytest.mark.slow(make_fuzz(MULDIMIF_IDS, KWARGS, FRAGMENTS, 10_000))
