"""The command-line contracts of the tool-calling task, run in-process through ``harness.cli.main``.

- ``mrbench score toolcall --data FILE.jsonl --out FILE.jsonl`` on the exported demo set;
- ``mrbench eval bfcl-v4 --predictions FILE.jsonl --out DIR [--data-dir DIR] [--categories ...]``.
"""

from __future__ import annotations

import json
import os

import pytest

from evals.bfcl import BFCLv4Evaluator, package_data_dir
from tasks.toolcall import demo
from tasks.toolcall.bfcl_gold import gold_response

DATA = os.environ.get("MRBENCH_DATA_DIR")


def _main():
    cli = pytest.importorskip("harness.cli")
    return cli.main


def test_score_toolcall_on_the_demo_set(tmp_path, capsys):
    main = _main()
    data, out = tmp_path / "demo.jsonl", tmp_path / "scored.jsonl"
    n = demo.write_jsonl(str(data), "test", "reference")
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows[0]["response"] = ""  # one empty response
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["score", "toolcall", "--data", str(data), "--out", str(out)]) in (0, None)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == n
    assert scored[0]["id"] == rows[0]["id"]
    assert scored[0]["rewards"] == {"format": 0.0, "correctness": -3.0}
    for row, src in zip(scored[1:], rows[1:]):
        calls = src["reward_model"]["ground_truth"].count('"name"')
        assert row["rewards"] == {"format": 1.0, "correctness": 3.0 if calls else 0.0}
        assert row["blocks"]["format"]
        assert row["details"]["correctness"]["reason"]
    printed = capsys.readouterr().out
    fmt = sum(r["rewards"]["format"] for r in scored) / n
    assert f"| format      |  {fmt:.3f} | {n:4d} |" in printed  # each reward's mean, not only a count
    assert "| correctness |" in printed


def test_toolcall_demo_help_prints_help_and_writes_nothing(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "tasks.toolcall.demo", "--help"], check=False, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "OUT.jsonl" in out.stdout and "reference" in out.stdout
    assert list(tmp_path.iterdir()) == []  # no file named --help
    bad = subprocess.run([sys.executable, "-m", "tasks.toolcall.demo", "x.jsonl", "dev"], check=False,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr and not (tmp_path / "x.jsonl").exists()


def test_eval_bfcl_with_predictions(tmp_path):
    main = _main()
    data_dir = os.path.join(DATA, "bfcl") if DATA else package_data_dir()
    if data_dir is None:
        pytest.skip("neither MRBENCH_DATA_DIR nor the bfcl-eval package data is available")
    cases = BFCLv4Evaluator().cases(data_dir=data_dir, categories=["simple_javascript", "live_parallel"])
    preds = tmp_path / "preds.jsonl"
    with preds.open("w") as fh:
        for i, c in enumerate(cases):
            response = gold_response(c.meta["functions"], c.meta["answers"], c.meta["language"])
            if i % 2:
                response = "<think> no </think>\n<response> no call </response>"
            fh.write(json.dumps({"id": c.id, "response": response}) + "\n")
    out = tmp_path / "out"
    code = main(["eval", "bfcl-v4", "--predictions", str(preds), "--data-dir", data_dir, "--out", str(out),
                 "--categories", "simple_javascript", "live_parallel"])
    assert code in (0, None)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == len(cases) == 66
    assert all({"id", "category", "valid", "error_type"} <= r.keys() for r in results)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["categories"]["simple_javascript"]["correct"] == 25  # the even-numbered half
    assert summary["categories"]["live_parallel"]["correct"] == 8
    assert "| simple_javascript | 25 | 50 | 50.00 | 50.00 |" in (out / "summary.md").read_text()


def test_score_toolcall_on_real_toolrl_rows(tmp_path):
    """ToolRL's own parquet rows, written as JSONL with a response, are valid score input."""
    if not DATA:
        pytest.skip("MRBENCH_DATA_DIR is not set: the ToolRL files are needed")
    main = _main()
    from tasks.toolcall.data import read_rows

    rows = read_rows(os.path.join(DATA, "toolrl", "rlla_4k_test.parquet"))[:12]
    data, out = tmp_path / "rlla.jsonl", tmp_path / "scored.jsonl"
    with data.open("w") as fh:
        for row in rows:
            fh.write(json.dumps({**row, "response": row["reward_model"]["ground_truth"]}) + "\n")
    assert main(["score", "toolcall", "--data", str(data), "--out", str(out)]) in (0, None)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == 12
    assert all(r["rewards"]["format"] == 1.0 for r in scored)
    assert all(-3.0 <= r["rewards"]["correctness"] <= 3.0 for r in scored)
