"""An end-of-run evaluation is fitted to the machine before it starts (evals/eval_budget.py): cases
that cannot fit in memory are left out, then the rest is capped to the time budget, each with one
warning; a recipe run on tiny-random over every BFCL case finishes instead of allocating tens of GB."""

from __future__ import annotations

import json

import pytest

from evals.base import EvalCase
from evals.eval_budget import fit_cases, fit_memory, fit_time
from evals.generate_cases import EVAL_BATCH, Estimate


class FakeBackend:
    """A generator whose memory per case is its prompt's length in bytes x 1000, and that records calls."""

    def __init__(self):
        self.calls = []

    def generation_bytes(self, messages, max_new_tokens, batch):
        return 1000 * batch * (len(messages[0]["content"]) + max_new_tokens)

    def generate(self, messages_list, max_new_tokens):
        self.calls.append((len(messages_list), max_new_tokens))
        return ["x"] * len(messages_list)


def _cases(lengths):
    return [EvalCase(id=f"c{i}", messages=[{"role": "user", "content": "p" * n}]) for i, n in enumerate(lengths)]


def test_cases_too_long_for_memory_are_left_out_with_one_warning():
    backend = FakeBackend()
    cases = _cases([10, 5000, 20, 90000])
    kept, notes = fit_memory("bench", backend.generate, cases, 10, budget=1000 * EVAL_BATCH * 1000)
    assert [c.id for c in kept] == ["c0", "c2"]
    assert len(notes) == 1 and "left out 2 of 4 cases" in notes[0] and "figures are over the other 2" in notes[0]
    assert backend.calls == []  # nothing generated to find out


def test_a_generator_that_cannot_say_its_cost_keeps_every_case():
    kept, notes = fit_memory("bench", lambda msgs, n: [""] * len(msgs), _cases([10, 10**6]), 10)
    assert len(kept) == 2 and notes == []


@pytest.mark.parametrize("seconds_per_batch,max_minutes,kept", [
    (1.0, 1.0, 40),  # 5 batches of 8 take 5 s: all
    (30.0, 1.0, 16),  # 2 batches fit in a minute
    (600.0, 1.0, 8),  # not even one fits: one batch, at least
])
def test_time_cap_keeps_the_first_whole_batches_that_fit(seconds_per_batch, max_minutes, kept):
    cases = _cases([10] * 40)

    def probe(name, generate, todo, max_new_tokens):  # a deterministic machine: first token 0, steps fixed
        return Estimate(name, len(todo), max_new_tokens, 0.0, seconds_per_batch / max_new_tokens)

    out, found, notes = fit_time("bench", FakeBackend().generate, cases, 100, max_minutes, probe=probe)
    assert [c.id for c in out] == [c.id for c in cases[:kept]]
    assert found.seconds == pytest.approx(5 * seconds_per_batch)
    assert bool(notes) == (kept < 40)
    if notes:
        assert f"only the first {kept} of 40 cases" in notes[0] and "schedule.eval_max_minutes" in notes[0]


def test_memory_comes_before_the_time_probe(monkeypatch):
    """The probe decodes the longest prompts, so a prompt that cannot fit must be gone before it runs."""
    import evals.eval_budget as budget

    backend = FakeBackend()
    seen = []
    monkeypatch.setattr(budget, "memory_budget", lambda: 1000 * EVAL_BATCH * 200)
    monkeypatch.setattr(budget, "estimate", lambda name, gen, todo, n: seen.append([c.id for c in todo])
                        or Estimate(name, len(todo), n, 0.0, 0.0))
    kept, notes = fit_cases("bench", backend.generate, _cases([10, 10**5, 30]), 10, 60.0)
    assert seen == [["c0", "c2"]] and [c.id for c in kept] == ["c0", "c2"] and len(notes) == 1


def test_the_memory_estimate_of_the_34_gb_case():
    """What the newcomer met: 8 prompts of ~16k byte tokens on the tiny model's 4 heads."""
    from harness.models import generation_bytes, tiny_model

    config = tiny_model(0).model.config
    need = generation_bytes(config, 16_000 + 1024, 8)
    assert need > 30 << 30  # the allocation that failed was 34 GB
    assert generation_bytes(config, 600, 8) < 200 << 20


def test_the_toolcall_recipe_on_tiny_random_over_every_bfcl_case_finishes(tmp_path, monkeypatch, capsys):
    """No eval_limit: all 3,625 BFCL cases are costed; those that cannot fit are left out, the rest is
    capped to the time budget, and the record finishes with the warnings in eval.json."""
    import evals.eval_budget as budget
    from harness import cli

    monkeypatch.setattr(budget, "memory_budget", lambda: 1 << 30)  # a small machine, deterministically
    rec = tmp_path / "rec"
    code = cli.main(["run", "--config", "toolcall-paper", "--model", "tiny-random", "--schedule.steps", "1",
                     "--sampling.prompts_per_step", "1", "--sampling.max_new_tokens", "16",
                     "--schedule.eval_max_new_tokens", "8", "--schedule.eval_max_minutes", "0.01",
                     "--output.dir", str(rec)])
    assert code == 0
    bfcl = json.loads((rec / "eval.json").read_text())["benchmarks"]["bfcl-v4"]
    assert bfcl["cases"] == EVAL_BATCH  # one batch fits 0.6 s at least
    assert any("too long for this machine's memory" in n for n in bfcl["capped"])
    assert any("only the first 8 of" in n for n in bfcl["capped"])
    assert json.loads((rec / "provenance.json").read_text())["status"] == "finished"
    assert "mrbench: warning: bfcl-v4: left out" in capsys.readouterr().out


def test_mrbench_eval_leaves_out_what_cannot_fit_before_its_probes(monkeypatch):
    """``mrbench eval --model``: the memory fit runs before the time probes, whatever --max-minutes."""
    import evals.eval_budget as budget
    from evals.runner import OverBudget, check_budget

    class Bench:
        max_new_tokens = 10

    monkeypatch.setattr(budget, "memory_budget", lambda: 1000 * EVAL_BATCH * 200)
    said = []
    cases = _cases([10, 10**5, 30])
    assert check_budget([("bench", Bench(), cases)], FakeBackend().generate, None, 0, say=said.append) == []
    assert [c.id for c in cases] == ["c0", "c2"] and "left out 1 of 3 cases" in said[0]
    with pytest.raises(OverBudget, match="left out 1 of 1 cases"):
        check_budget([("bench", Bench(), _cases([10**5]))], FakeBackend().generate, None, 0, say=None)
