import json
import subprocess
import sys

import pytest
from fake_plugins import ShoutEvaluator, ShoutTask

from evals import runner as eval_runner
from harness import cli, scoring


def test_score_command_writes_rewards_blocks_and_details(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(scoring, "make_task", lambda name: ShoutTask())
    data = tmp_path / "in.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [
        {"id": "r1", "word": "apple", "response": "I LOVE APPLE"},
        {"word": "pear", "response": "a plum"},
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    assert cli.main(["score", "shout", "--data", str(data), "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["id"] == "r1" and rows[0]["rewards"] == {"upper": 1.0, "has_word": 1.0}
    assert rows[1]["id"] == "2" and rows[1]["rewards"] == {"upper": 0.0, "has_word": 0.0}
    assert rows[0]["blocks"]["has_word"] == "Say apple."
    assert rows[0]["details"]["upper"]["spans"] == [[0, 12]]
    assert rows[0]["reward_names"] == ["upper", "has_word"]


def test_score_command_names_file_and_row_of_bad_data(tmp_path, monkeypatch):
    from tasks.base import DataError

    monkeypatch.setattr(scoring, "make_task", lambda name: ShoutTask())
    data = tmp_path / "in.jsonl"
    data.write_text('{"word": "a", "response": "x"}\n{"word": "b"}\n')
    with pytest.raises(DataError, match=r"in.jsonl, row 2: row has no 'response'"):
        scoring.score_file("shout", str(data), str(tmp_path / "o.jsonl"))
    data.write_text('{"word": "a", "response": "x"}\nnot json\n')
    with pytest.raises(DataError, match=r"in.jsonl, row 2: not valid JSON"):
        scoring.score_file("shout", str(data), str(tmp_path / "o.jsonl"))


def test_eval_command_with_predictions(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(eval_runner, "make_evaluator", lambda name: ShoutEvaluator())
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "a", "response": "APPLE!"}\n{"prompt": "pb", "response": "no"}\n{"id": "zz", "response": ""}\n')
    out = tmp_path / "ev"
    assert cli.main(["eval", "shout-bench", "--predictions", str(preds), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy"] == 0.5
    assert summary["cases"] == 2 and summary["missing_predictions"] == 0 and summary["unmatched_predictions"] == 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["valid"] for r in rows] == [True, False]
    assert "| accuracy |" in (out / "summary.md").read_text()


def test_eval_needs_exactly_one_source(tmp_path):
    assert cli.main(["eval", "x", "--out", str(tmp_path)]) == 2


def test_unknown_task_lists_known_ones(tmp_path, capsys):
    data = tmp_path / "in.jsonl"
    data.write_text("{}\n")
    assert cli.main(["score", "nosuchtask", "--data", str(data), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "unknown task 'nosuchtask'" in err
    assert all(name in err for name in ("ifollow", "text2sql", "toolcall"))  # plugins may add names


def test_run_rejects_bad_override(capsys):
    assert cli.main(["run", "--optim.lr", "fast"]) == 2
    assert "optim.lr: expected a number" in capsys.readouterr().err


def test_split_overrides():
    assert cli._split_overrides(["--algo.beta", "0.25", "--seed=3", "--optim.lr", "-1e-3"]) == [
        ("algo.beta", "0.25"), ("seed", "3"), ("optim.lr", "-1e-3")]
    with pytest.raises(SystemExit):
        cli._split_overrides(["--algo.beta"])


def test_hyphens_become_underscores_except_in_a_plugin_backends_name():
    pairs = cli._split_overrides(["--task.options.max-chars", "3", "--backend.options.my-backend.queue-size", "2"])
    assert pairs == [("task.options.max_chars", "3"), ("backend.options.my-backend.queue_size", "2")]


def test_mrbench_list_shows_every_registered_name():
    out = subprocess.run([sys.executable, "-m", "harness.cli", "list"], capture_output=True, text=True, check=True).stdout
    for name in ["toolcall", "text2sql", "ifollow", "grpo", "gdpo", "saw", "dara", "dvao", "gd2po", "sa-mrpo",
                 "mrtpo", "mrtpo+saw", "mrtpo-joint", "mrtpo-shuffled", "cort", "opsd", "local", "bfcl-v4",
                 "spider-dev", "spider-syn", "spider-realistic", "spider-dk", "bird-dev", "ifeval", "ifbench",
                 "muldimif", "ifollow-heldout"]:
        assert f"  {name} " in out or f"  {name}\n" in out, name


def test_mrbench_list_reports_a_task_plugin_without_a_docstring(monkeypatch, capsys):
    """A task class without a docstring is listed as undescribed (docs/adding-a-task.md asks for one)."""
    from tasks.base import Task
    from tasks.registry import TASKS

    class Shout(Task):
        name = "shout"

    TASKS.add("shout", Shout)
    try:
        assert cli.main(["list"]) == 0
    finally:
        del TASKS._entries["shout"]  # the registry as it was (built-ins registered meanwhile stay)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  shout "))
    assert "(no description:" in line and "Shout has no docstring" in line


def test_eval_command_generates_with_a_model(tmp_path, monkeypatch):
    monkeypatch.setattr(eval_runner, "make_evaluator", lambda name: ShoutEvaluator())
    out = tmp_path / "ev"
    assert cli.main(["eval", "shout-bench", "--model", "tiny-random", "--out", str(out), "--max-new-tokens", "4"]) == 0
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in preds] == ["a", "b"] and all(isinstance(p["response"], str) for p in preds)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"] == "model:tiny-random" and summary["cases"] == 2


def test_score_command_reports_bad_rows_without_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(scoring, "make_task", lambda name: ShoutTask())
    data = tmp_path / "in.jsonl"
    data.write_text('{"word": "a", "response": "x"}\n{"response": "y"}\n')
    assert cli.main(["score", "shout", "--data", str(data), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "in.jsonl, row 2" in err and "Traceback" not in err


def test_eval_several_benchmarks_with_a_model_reports_the_text2sql_paper_average(tmp_path, monkeypatch):
    from evals.base import EvalReport

    class FakeSQL(ShoutEvaluator):
        def __init__(self, name, acc):
            self.name, self.acc = name, acc

        def score(self, cases, responses):
            return EvalReport([], {"execution_accuracy": self.acc}, f"| {self.name} | {self.acc} |")

    accs = {"spider-dev": 0.5, "spider-syn": 0.25}
    monkeypatch.setattr(eval_runner, "make_evaluator", lambda name: FakeSQL(name, accs[name]))
    monkeypatch.setattr(eval_runner, "generate_for_cases", lambda model, cases, n, **kw: {c.id: "" for c in cases})
    from evals import eval_budget  # no model "m" loads to cost the cases' memory: every case fits

    monkeypatch.setattr(eval_budget, "fit_memory", lambda name, generate, cases, n, budget=None: (list(cases), []))
    out = tmp_path / "suite"
    assert cli.main(["eval", "spider-dev", "spider-syn", "--model", "m", "--out", str(out)]) == 0
    suite = json.loads((out / "suite.json").read_text())
    avg = suite["text2sql_paper_average"]
    assert avg["average"] == 0.375 and avg["benchmarks"] == ["spider-dev", "spider-syn"]
    assert "bird-dev" in avg["missing"]
    assert (out / "spider-dev" / "summary.json").exists() and (out / "spider-syn" / "results.jsonl").exists()
    assert cli.main(["eval", "spider-dev", "spider-syn", "--predictions", "p.jsonl", "--out", str(out)]) == 2


def test_unknown_category_is_an_error_not_a_traceback(tmp_path, capsys):
    import os

    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data:
        pytest.skip("MRBENCH_DATA_DIR is not set")
    preds = tmp_path / "p.jsonl"
    preds.write_text("")
    rc = cli.main(["eval", "bfcl-v4", "--predictions", str(preds), "--out", str(tmp_path / "o"),
                   "--data-dir", os.path.join(data, "bfcl"), "--categories", "nosuch"])
    assert rc == 2
    assert "nosuch" in capsys.readouterr().err
