"""Shared Hypothesis fuzz harness for constraint checkers (IFBench, MulDimIF).

Checkers are wrapped so that an internal exception becomes a failed verdict with the reason
"checker failed ..."; the fuzz looks through the wrapper: no checker may reach that branch, every
verdict is a bool, and every span read lies inside the response.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks.ifollow.constraints.base import CheckResult, get_constraint


def responses(fragments: Sequence[str]) -> st.SearchStrategy[str]:
    """Arbitrary text, or text assembled from fragments that reach the checkers' structured branches."""
    return st.one_of(
        st.text(max_size=300),
        st.lists(st.one_of(st.sampled_from(list(fragments)), st.text(max_size=8)), max_size=40).map("".join),
    )


def assert_sound(cid: str, response: str, result: CheckResult) -> None:
    assert isinstance(result, CheckResult), cid
    assert isinstance(result.ok, bool), cid
    assert "checker failed" not in result.reason, (cid, result.reason, response)
    for start, end in result.spans:
        assert 0 <= start <= end <= len(response), (cid, result.spans)


def make_fuzz(ids: Sequence[str], kwargs: Mapping[str, dict[str, Any]], fragments: Sequence[str], n_examples: int):
    """A test function running ``n_examples`` responses through every checker in ``ids``."""

    @settings(max_examples=n_examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(responses(fragments))
    def run(response):
        for cid in ids:
            assert_sound(cid, response, get_constraint(cid).checker(response, kwargs.get(cid, {})))

    return run
