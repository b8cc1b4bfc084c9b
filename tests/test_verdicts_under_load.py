"""Verdicts that do not depend on the machine's load (issue 47): ``mrbench score ifollow`` and
``mrbench eval ifeval`` on 147 IFEval prompts with real responses (IFBench's sample outputs, as the
official differential test pairs them) give the same verdicts, with no timeout, on a machine left
as it is and with every core kept busy by two spinning processes each. The budget is the
verifier's own CPU time and the warm-up comes before it (:mod:`tasks.verifier_budget`), so the
comparison holds on any host, however busy already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

ROWS = 147
#: spinning processes per core while the loaded run scores
SPINNERS_PER_CORE = 2


def _rows() -> list[dict]:
    root = os.environ.get("MRBENCH_DATA_DIR")
    if not root:
        pytest.skip("MRBENCH_DATA_DIR is not set: the IFEval prompts and IFBench responses are not available")
    prompts = [json.loads(line) for line in (Path(root) / "ifeval" / "input_data.jsonl").open(encoding="utf-8")]
    pool = [json.loads(line)["response"] for line in (Path(root) / "ifbench" / "sample_output.jsonl").open(
        encoding="utf-8")]
    return [{**row, "response": pool[(i * 7) % len(pool)]} for i, row in enumerate(prompts[:ROWS])]


@contextmanager
def busy_cores():
    """Every core kept busy by :data:`SPINNERS_PER_CORE` spinning processes, each seen on the CPU
    before the block starts."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(SPINNERS_PER_CORE * (os.cpu_count() or 1))]
    try:
        for proc in spinners:
            handle = psutil.Process(proc.pid)
            while sum(handle.cpu_times()[:2]) < 0.05:
                time.sleep(0.01)
        yield
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def _score(rows: list[dict], work: Path) -> list[dict]:
    """``mrbench score ifollow`` in a process of its own (its first scoring starts cold)."""
    data, out = work / "in.jsonl", work / "out.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "score", "ifollow", "--data", str(data),
                           "--out", str(out)], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "time budget" not in proc.stderr, proc.stderr  # the warning that counts timed-out rows
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _eval(rows: list[dict], work: Path) -> list[dict]:
    """``mrbench eval ifeval --predictions`` on the same responses, in a process of its own."""
    data = work / "ifeval"
    data.mkdir(exist_ok=True)
    (data / "input_data.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "response"}) + "\n"
                                                   for r in rows), encoding="utf-8")
    preds = work / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": str(r["key"]), "response": r["response"]}) + "\n" for r in rows),
                     encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "ifeval", "--predictions", str(preds),
                           "--data-dir", str(work), "--out", str(work / "eval")], capture_output=True, text=True, check=False,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((work / "eval" / "summary.json").read_text())["verifier_timeouts"] == 0
    return [json.loads(line) for line in (work / "eval" / "results.jsonl").read_text().splitlines()]


def _verdicts(scored: list[dict]) -> list[tuple]:
    return [(row["id"], tuple(sorted(row["rewards"].items())),
             tuple(sorted((k, d["reason"]) for k, d in row["details"].items()))) for row in scored]


def test_score_and_eval_verdicts_are_the_same_idle_and_with_every_core_busy(tmp_path):
    rows = _rows()
    (tmp_path / "as-is").mkdir()
    (tmp_path / "busy").mkdir()
    scored, evaluated = _score(rows, tmp_path / "as-is"), _eval(rows, tmp_path / "as-is")
    with busy_cores():
        scored_busy, evaluated_busy = _score(rows, tmp_path / "busy"), _eval(rows, tmp_path / "busy")
    assert len(scored) == ROWS
    reasons = {d["reason"] for row in scored + scored_busy for d in row["details"].values()}
    assert "timeout" not in reasons
    assert _verdicts(scored_busy) == _verdicts(scored)
    strip = ("id", "strict", "loose")
    assert [{k: r.get(k) for k in strip} for r in evaluated_busy] == [{k: r.get(k) for k in strip} for r in evaluated]
    # both paths check the same instructions alike
    assert sum(sum(v == 1.0 for v in row["rewards"].values()) for row in scored) == \
        sum(sum(r["strict"]) for r in evaluated)
