"""Evaluation with a model: batched generation (longest prompts first, skipped cases never asked),
an estimate of each benchmark's time measured before it starts, refused above ``--max-minutes``, and
each benchmark's result printed as it finishes."""

from __future__ import annotations

import json
import math

import pytest
from fake_plugins import ShoutEvaluator

from evals import generate_cases as gc
from evals import runner as eval_runner
from evals.base import EvalCase, EvalReport
from harness import cli


def _cases(n, skip=()):
    return [EvalCase(f"c{i}", [{"role": "user", "content": "x" * (i + 1)}], "", {"skip_reason": "no db"} if i in skip
                     else {}) for i in range(n)]


class FakeModel:
    """Records each call; advances a fake clock by 0.5 s per call plus 0.1 s per decoding step."""

    def __init__(self):
        self.calls, self.clock = [], 0.0

    def __call__(self, messages_list, max_new_tokens):
        self.calls.append(([m[0]["content"] for m in messages_list], max_new_tokens))
        self.clock += 0.5 + 0.1 * max_new_tokens
        return ["APPLE PEAR " + m[0]["content"] for m in messages_list]


def test_generation_is_batched_longest_first_and_skips_what_cannot_be_scored():
    model = FakeModel()
    cases = _cases(19, skip={3})
    out = gc.generate_for_cases(model, cases, 16, progress=False)
    assert set(out) == {c.id for c in cases} - {"c3"}
    sizes = [len(batch) for batch, _ in model.calls]
    assert sizes == [8, 8, 2] and all(n == 16 for _, n in model.calls)
    lengths = [len(p) for batch, _ in model.calls for p in batch]
    assert lengths == sorted(lengths, reverse=True)


def test_estimate_from_two_probes_by_hand(monkeypatch):
    model = FakeModel()
    monkeypatch.setattr(gc.time, "perf_counter", lambda: model.clock)
    e = gc.estimate("bench", model, _cases(20), 1000)
    assert e.first_token_s == pytest.approx(0.6) and e.step_s == pytest.approx(0.1)
    assert e.seconds == pytest.approx(math.ceil(20 / 8) * (0.6 + 1000 * 0.1))
    assert [(len(b), n) for b, n in model.calls] == [(1, 1), (8, 1), (8, 1 + gc.PROBE_TOKENS)]  # load, then time
    assert "bench: 20 cases of up to 1000 tokens, about 5.0 min on this machine" in e.describe()


def _suite(monkeypatch, model):
    monkeypatch.setattr(gc.time, "perf_counter", lambda: model.clock)

    class Bench(ShoutEvaluator):
        def __init__(self, name):
            self.name = name

        def score(self, cases, responses):
            return EvalReport([], {"accuracy": 1.0}, f"| {self.name} table |")

    monkeypatch.setattr(eval_runner, "make_evaluator", Bench)
    monkeypatch.setattr("harness.generation.backend_generate", lambda *a, **k: model)


def test_a_benchmark_over_the_bound_is_refused_before_anything_is_generated(tmp_path, monkeypatch, capsys):
    model = FakeModel()
    _suite(monkeypatch, model)
    args = ["eval", "one", "two", "--model", "m", "--out", str(tmp_path / "o"), "--max-new-tokens", "600"]
    assert cli.main(args + ["--max-minutes", "1"]) == 2  # 0.6 + 600 x 0.1 = 60.6 s a batch
    err = capsys.readouterr().err
    assert "one: 2 cases of up to 600 tokens, about 1.0 min" in err and "more than --max-minutes 1" in err
    assert "--limit" in err and "Traceback" not in err
    assert all(n <= 1 + gc.PROBE_TOKENS for _, n in model.calls)  # only the probes ran
    assert not (tmp_path / "o").exists()


def test_each_benchmark_result_is_printed_as_it_finishes(tmp_path, monkeypatch, capsys):
    model = FakeModel()
    _suite(monkeypatch, model)
    out = tmp_path / "o"
    assert cli.main(["eval", "one", "two", "--model", "m", "--out", str(out), "--max-new-tokens", "4"]) == 0
    printed = capsys.readouterr().out
    order = [printed.index(s) for s in ("estimate: one", "estimate: two", "benchmark 1/2: one (2 cases)",
                                        "| one table |", "benchmark 2/2: two", "| two table |")]
    assert order == sorted(order)
    assert json.loads((out / "suite.json").read_text())["benchmarks"]["two"]["accuracy"] == 1.0
    assert cli.main(["eval", "one", "--model", "m", "--out", str(tmp_path / "p"), "--max-new-tokens", "4",
                     "--max-minutes", "0"]) == 0
    assert "estimate:" not in capsys.readouterr().out  # 0: no bound, no probe


def test_every_eval_option_has_help():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name in ("list", "run", "config", "eval", "score", "credit", "localize", "report", "sweep", "leaderboard"):
        for action in sub.choices[name]._actions:
            if action.dest != "help":
                assert action.help, f"mrbench {name} {action.option_strings or action.dest}: no help"
