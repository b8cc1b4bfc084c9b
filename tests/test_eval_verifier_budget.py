"""``mrbench eval`` bounds each response's verifiers as training and ``mrbench score`` do
(reliability probe 4, B2): the same per-response budget (``task.verifier_timeout_s``, 5 s by
default); past it the response fails every check with the reason ``timeout``, counted in the
summary. A checker that never finishes on its own stands for IFBench's 30 us-per-byte ones.
"""

from __future__ import annotations

import json

import pytest

from evals import ifollow as ifollow_evals
from evals.base import EvalCase, Evaluator
from evals.registry import make_evaluator
from harness.config import resolve
from tasks.base import DEFAULT_VERIFIER_TIMEOUT_S

FOREVER_S = 60.0  # a checker that would take this long: far past any budget


def _stuck(cid, text, kwargs, **kw):
    import time

    end = time.monotonic() + FOREVER_S
    while time.monotonic() < end:  # a linear-time checker on a huge response, in effect
        pass
    return type("R", (), {"ok": True, "reason": ""})()


def _case(cid="punctuation:no_comma"):
    return EvalCase(id="c1", messages=[{"role": "user", "content": "x"}], category="punctuation",
                    meta={"prompt": "x", "constraints": [[cid, {}]]})


@pytest.mark.parametrize("name", ["ifeval", "ifbench"])
def test_a_checker_past_the_budget_fails_its_response_with_reason_timeout(monkeypatch, name):
    monkeypatch.setattr(ifollow_evals, "check", _stuck)
    evaluator = make_evaluator(name)
    evaluator.verifier_timeout_s = 0.2
    report = evaluator.score([_case()], {"c1": "a. " * 10})
    assert report.summary["verifier_timeouts"] == 1
    row = report.rows[0]
    assert row["strict"] == [False] and row["loose"] == [False] and row["reason"] == "timeout"


def test_the_budget_is_the_trainings_and_score_default():
    assert Evaluator.verifier_timeout_s == DEFAULT_VERIFIER_TIMEOUT_S
    assert resolve(None, []).task.verifier_timeout_s == DEFAULT_VERIFIER_TIMEOUT_S


def test_a_fast_checker_is_untouched(monkeypatch):
    evaluator = make_evaluator("ifeval")
    report = evaluator.score([_case()], {"c1": "no commas here"})
    assert report.summary["verifier_timeouts"] == 0 and report.rows[0]["strict"] == [True]


def test_the_eval_command_applies_it(tmp_path, monkeypatch, capsys):
    from harness import cli

    monkeypatch.setattr(ifollow_evals, "check", _stuck)
    monkeypatch.setattr(Evaluator, "verifier_timeout_s", 0.2)
    data = tmp_path / "ifeval"
    data.mkdir()
    (data / "input_data.jsonl").write_text(json.dumps({"key": 1, "prompt": "p", "instruction_id_list":
                                                       ["punctuation:no_comma"], "kwargs": [{}]}) + "\n")
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "1", "response": "a. " * 1000}) + "\n")
    assert cli.main(["eval", "ifeval", "--predictions", str(preds), "--data-dir", str(tmp_path),
                     "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["verifier_timeouts"] == 1 and summary["prompt_level_strict_acc"] == 0.0
