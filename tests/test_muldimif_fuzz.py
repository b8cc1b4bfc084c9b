"""Hypothesis fuzzing: 10,000 (slow-marked; 2,000 by default) arbitrary responses through every MulDimIF checker, no exception.

As for IFBench: the wrapper turns an internal exception into "checker failed ..."; no checker may
reach that branch, verdicts are bools and spans lie inside the response. Keyword arguments are
those the parser produces for real test-set constraints, one per type.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks.ifollow.constraints.base import CheckResult, get_constraint
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

responses = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join),
)


def assert_sound(cid: str, response: str, result: CheckResult) -> None:
    assert isinstance(result, CheckResult), cid
    assert isinstance(result.ok, bool), cid
    assert "checker failed" not in result.reason, (cid, result.reason, response)
    for start, end in result.spans:
        assert 0 <= start <= end <= len(response), (cid, result.spans)


def _fuzz(n_examples: int):
    @settings(max_examples=n_examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(responses)
    def run(response):
        for cid in MULDIMIF_IDS:
            assert_sound(cid, response, get_constraint(cid).checker(response, KWARGS.get(cid, {})))

    return run


# 2,000 responses in the default suite (~12 s); the full 10,000 (~60 s on a shared 2-core machine) is slow-marked.
test_every_muldimif_checker_survives_arbitrary_responses_2000 = _fuzz(2_000)
test_every_muldimif_checker_survives_arbitrary_responses_10000 = pytest.mark.slow(_fuzz(10_000))
