"""No verifier can stall training (reliability probe 3, 8c).

1. The linear scanners that replaced quadratic regexes give exactly the regexes' matches
   (Hypothesis, on text built from the characters that matter);
2. every registered constraint checker reads 1 MB of hostile text (brackets, asterisks, spaces,
   words with no punctuation, one long word) within a bound of 1 s of CPU time each (a bound, not a
   timing figure: the quadratic checkers took 19 s to over 280 s on such text; process time, so that
   other work on a shared machine does not count);
3. scoring gives up on a response past its time budget: every reward gets its failure value with
   the reason ``timeout``, and the step's metrics count it (``verifier_timeouts``).
"""

from __future__ import annotations

import gc
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ifollow_core_fuzz import SAMPLES

from mrbench_core.time_budget import TimeBudgetExceeded, time_limit
from tasks.base import TIMEOUT_REASON, Example, Task, Verdict
from tasks.ifollow.constraints import CONSTRAINTS
from tasks.ifollow.constraints import ifbench_common as ifc
from tasks.ifollow.constraints import ifeval as ie
from tasks.ifollow.constraints import linear_scan as ls
from tasks.ifollow.constraints import muldimif_text as mt

PIECES = ["[", "]", ".", " ", "\n", "\t", "p", "s", "*", "-", "<<", ">>", "<", ">", "x", "P.S.", "p.p.s", "!", "?",
          "。", "\r", "\u00a0", "hint"]
texts = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=400, deadline=None, database=None)
@given(texts)
def test_linear_scanners_find_exactly_the_regex_matches(text):
    assert ls.bracket_spans(text) == [m.span() for m in re.finditer(r"\[.*?\]", text)]
    assert ls.line_start_spans(text, ls.star_bullet_head) == [
        m.span() for m in re.finditer(r"^\s*\*[^\*].*$", text, re.MULTILINE)]
    assert ls.line_start_spans(text, ls.dash_bullet_head) == [m.span() for m in re.finditer(r"^\s*-.*$", text, re.MULTILINE)]
    assert ls.title_spans(text) == [m.span() for m in re.finditer(r"<<[^\n]+>>", text)]
    old_sentences = [m.group(0).strip() for m in re.finditer(r"[^.!?。！？]*[.!?。！？]", text) if m.group(0).strip()]
    assert mt.sentences(text) == old_sentences
    low = text.lower()
    for pattern in (r"\s*p\.\s?p\.\s?s.*$", r"\s*p\.\s?s\..*$", r"\s*hint.*$", r"\s*(x|p).*$"):
        assert ls.leading_space_search(pattern, low, re.MULTILINE, ie._search_all) == \
            ie._search_all(pattern, low, re.MULTILINE), pattern


ONE_MB = 1 << 20
HOSTILE = {"brackets": "[", "asterisks": "*", "spaces": " ", "no punctuation": "word ", "one long word": "a"}
BOUND_S = 1.0


def _cpu_seconds(cid: str, text: str) -> float:
    """CPU seconds of one checker on ``text``, paying for its own tokenization (memos cleared)."""
    for memo in (ifc.punkt_sentences, ifc.sentence_spans, ifc.treebank_words):
        memo.cache_clear()
    start = time.process_time()
    try:
        with time_limit(20 * BOUND_S):  # a regression fails this test quickly instead of hanging it
            CONSTRAINTS.get(cid).checker(text, dict(SAMPLES[cid][0]))
    except (TimeBudgetExceeded, Exception):  # noqa: BLE001, S110  (a checker error is a failed check: only the time matters)
        pass
    return time.process_time() - start


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_every_checker_reads_a_megabyte_of_hostile_text_within_the_bound(kind):
    piece = HOSTILE[kind]
    text = (piece * (ONE_MB // len(piece) + 1))[:ONE_MB]
    slow = {}
    gc.collect()
    gc.disable()  # no checker pays for a cyclic collection of the others' garbage
    try:
        times = {cid: _cpu_seconds(cid, text) for cid in sorted(CONSTRAINTS.names())}
    finally:
        gc.enable()
    for cid, spent in times.items():
        if spent > BOUND_S:  # once more: a busy machine slows even CPU time (shared caches and cores)
            spent = min(spent, _cpu_seconds(cid, text))
        if spent > BOUND_S:
            slow[cid] = round(spent, 2)
    assert not slow, f"checkers over {BOUND_S} s of CPU on 1 MB of {kind}: {slow}"


# -- the time budget ----------------------------------------------------------------------------
class StallingTask(Task):
    """Two rewards; its verifier loops until stopped."""

    name = "stalling"
    version = "1"

    def load(self, split="train", data_dir=None):
        return []

    def example_from_row(self, row, *, where="", data_dir=None):
        raise NotImplementedError

    def reward_range(self, name):
        return (-1.0, 1.0) if name == "signed" else None

    def score(self, example, response):
        if response == "stall":
            while True:
                re.findall(r"\[.*?\]", "[" * 20_000)  # stays inside the regex engine most of the time
        return [Verdict(reward=n, value=1.0, reason="ok") for n in example.reward_names]


EXAMPLE = Example(id="e", messages=[{"role": "user", "content": "x"}], reward_names=["signed", "plain"])


def test_a_stalled_verifier_gets_the_failure_value_with_reason_timeout():
    task = StallingTask()
    t0 = time.monotonic()
    verdicts = task.score_within(EXAMPLE, "stall", 0.2)
    assert time.monotonic() - t0 < 10
    assert [(v.reward, v.value, v.reason) for v in verdicts] == [("signed", -1.0, TIMEOUT_REASON),
                                                                 ("plain", 0.0, TIMEOUT_REASON)]
    assert [v.value for v in task.score_within(EXAMPLE, "fine", 0.2)] == [1.0, 1.0]
    assert [v.value for v in task.score_within(EXAMPLE, "fine", 0)] == [1.0, 1.0]  # 0: no limit


def test_a_checker_that_catches_exception_cannot_swallow_the_timeout():
    with pytest.raises(TimeBudgetExceeded), time_limit(0.1):
        try:
            while True:
                re.findall(r"\[.*?\]", "[" * 20_000)
        except Exception:  # noqa: BLE001  (what the constraint wrappers do)
            pytest.fail("the budget was caught as an ordinary checker error")


def test_an_enclosing_timer_is_given_back():
    import signal

    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with time_limit(5):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 0.5
        time.sleep(0.7)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_step_metrics_count_the_timed_out_responses():
    from types import SimpleNamespace

    import torch

    from harness.training.step_metrics import UpdateStats, step_row

    timed_out = SimpleNamespace(verdicts=StallingTask().timeout_verdicts(EXAMPLE, 0.1), response_ids=[1, 2],
                                truncated=False)
    fine = SimpleNamespace(verdicts=[Verdict("signed", 1.0, "ok"), Verdict("plain", 1.0, "ok")], response_ids=[1],
                           truncated=False)
    rewards = torch.tensor([[-1.0, 0.0], [1.0, 1.0]])
    mask = torch.ones(2, 2, dtype=torch.bool)
    rep = SimpleNamespace(pairs_replayed=0, pairs_total=4, sequences=0)
    row = step_row(0, [timed_out, fine], rewards, mask, torch.zeros(2, 2), rep, UpdateStats(), {}, None, False)
    assert row["verifier_timeouts"] == 1


def test_score_command_counts_timeouts(tmp_path, monkeypatch):
    import json

    from harness import scoring

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "response": "stall"}) + "\n" + json.dumps({"id": "b", "response": "ok"}) + "\n")
    task = StallingTask()
    task.example_from_row = lambda row, where="", data_dir=None: EXAMPLE
    monkeypatch.setattr(scoring, "make_task", lambda name: task)
    result = scoring.score_file("stalling", str(rows), str(tmp_path / "out.jsonl"), time_budget_s=0.2)
    assert result.timeouts == ["row 1"] and "ran past the verifiers' time budget" in " ".join(result.warnings())
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out[0]["details"]["plain"]["reason"] == TIMEOUT_REASON and out[1]["rewards"]["plain"] == 1.0


# -- text-to-SQL on long model output ------------------------------------------------------------------
def test_clause_spans_never_raise_on_a_long_chain_and_skip_what_the_sandbox_refuses():
    from tasks.text2sql.sqltext import MAX_PARSED_CHARS, clause_spans, lex

    chain = "SELECT " + " + ".join(["1"] * 20_000)  # 80 kB: a tree too deep to walk recursively
    assert clause_spans(chain) == {"select": [], "conditions": [], "tables": [], "columns": []}
    huge = "SELECT " + "x" * MAX_PARSED_CHARS
    t0 = time.process_time()
    assert all(not spans for spans in clause_spans(huge).values())
    assert time.process_time() - t0 < BOUND_S
    assert lex("SELECT a FROM t") is not lex("SELECT a FROM t")  # memoised, but each caller gets its own list
    assert [t.text for t in lex("SELECT a FROM t")] == ["SELECT", "a", "FROM", "t"]
