"""Hypothesis fuzzing: arbitrary responses through every registered checker never raise.

The raw checkers are called directly (bypassing the safety net in ``check``), with parameters
taken from the real data files where available (every IFEval/IFBench kwargs shape, MulDimIF's
parsed constraints) and from the hand tables otherwise. The default run draws 100 responses;
the acceptance run (``-m slow``) draws 10,000.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks.ifollow.constraints import CONSTRAINTS, CheckResult, check, clean_kwargs
from tasks.ifollow.textutil import loose_variants

PIECES = ["*", "**", "***", "\n", "\n\n", " ", "-", "<<", ">>", "[", "]", "\"", "'", ",", ".", "?", "!", "P.S.",
          "P.P.S", "Section 1", "******", "```json", "{", "}", "1.", "#", "|", "Ünï", "日本語", "😀", "\t", "\u200b",
          "THE", "the", "and", "word", "é", "\r\n", "0", "42"]

responses = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=30).map(" ".join),
)


def _kwargs_samples() -> dict[str, list[dict[str, Any]]]:
    """Up to 3 distinct kwargs per registered id."""
    out: dict[str, list[dict[str, Any]]] = {cid: [] for cid in CONSTRAINTS.names()}

    def add(cid: str, kw: dict[str, Any]) -> None:
        if cid in out and kw not in out[cid] and len(out[cid]) < 3:
            out[cid].append(kw)

    root = os.environ.get("MRBENCH_DATA_DIR")
    if root:
        for name in ("ifeval/input_data.jsonl", "ifbench/IFBench_test.jsonl"):
            path = Path(root) / name
            if path.is_file():
                for line in path.open():
                    row = json.loads(line)
                    for cid, kw in zip(row["instruction_id_list"], row["kwargs"]):
                        add(cid, clean_kwargs(kw))
        path = Path(root) / "muldimif" / "test.json"
        try:
            from tasks.ifollow.constraints.muldimif import constraints_for_row
        except ImportError:
            constraints_for_row = None
        if path.is_file() and constraints_for_row is not None:
            for row in json.loads(path.read_text())[:400]:
                for cid, kw in constraints_for_row(row):
                    add(cid, kw)
    from test_ifeval_tables import TABLE as IFEVAL_TABLE

    for cid, rows in IFEVAL_TABLE.items():
        for _, kw, _, _ in rows:
            add(cid, kw)
    for cid, kws in out.items():
        if not kws:
            kws.append({})
    return out


SAMPLES = _kwargs_samples()


def _all_checkers_on(text: str) -> None:
    variants = loose_variants(text)
    for cid, kws in SAMPLES.items():
        ctype = CONSTRAINTS.get(cid)
        for kw in kws:
            for variant in (variants[0], variants[4]):
                result = ctype.checker(variant.text, dict(kw))  # raw: must not raise
                if isinstance(result, CheckResult):
                    for s, e in result.spans:
                        assert 0 <= s <= e <= len(variant.text), (cid, kw, result.spans)
        res = check(cid, text, kws[0], loose=True)
        assert isinstance(res.ok, bool)
        assert all(0 <= s <= e <= len(text) for s, e in res.spans), (cid, res.spans)


def test_samples_cover_every_registered_type() -> None:
    assert set(SAMPLES) == set(CONSTRAINTS.names())
    print(f"\nfuzzing {len(SAMPLES)} constraint types with {sum(map(len, SAMPLES.values()))} kwargs sets")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses)
def test_every_checker_survives_arbitrary_responses(text: str) -> None:
    _all_checkers_on(text)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(responses)
def test_every_checker_survives_10000_arbitrary_responses(text: str) -> None:
    _all_checkers_on(text)
