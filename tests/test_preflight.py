"""Pre-flight (task x algorithm x backend x benchmarks fit, before any model is loaded), records of
runs that fail mid-step, and the end-of-run evaluation following the task."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from toy_task import register, tiny_config

from harness import cli
from harness.config import resolve
from harness.preflight import PreflightError, preflight
from harness.records import load_record

ROOT = Path(__file__).resolve().parent.parent


def test_cort_on_toolcall_exits_2_before_loading_a_model(tmp_path, monkeypatch, capsys):
    from harness import cli

    monkeypatch.setattr("harness.backends.local_engine.load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    code = cli.main(["run", "--task", "toolcall", "--algo", "cort", "--output.root", str(tmp_path)])
    assert code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "cort needs a prompt without its rubric" in lines[0] and "toolcall" in lines[0]
    assert "mrtpo" in lines[0].split("algorithms that fit toolcall:")[1]  # what would fit
    assert "cort" not in lines[0].split("algorithms that fit toolcall:")[1].split(", ")
    assert not any(tmp_path.iterdir())  # no record was opened: it stopped before any model loads


@pytest.mark.parametrize("overrides,message", [
    ([("task", "toolcall"), ("algo", "opsd")], None),  # toolcall defines a teacher context
    ([("task", "ifollow"), ("algo", "cort")], None),  # ifollow's rubric is in the prompt
    ([("task", "text2sql"), ("algo", "cort")], "needs a prompt without its rubric"),
    ([("algo", "nosuch")], "unknown algorithm 'nosuch'"),
    ([("algo.beta", "2.0")], r"--algo.beta: must be >= 0 and < 1, got 2.0"),
    ([("backend", "nosuch")], "unknown backend 'nosuch'"),
    ([("task", "toolcall"), ("schedule.eval_benchmarks", "[ifeval]")], "'ifeval' evaluates task 'ifollow'"),
    ([("task", "toolcall"), ("schedule.eval_benchmarks", "[ifeval]"), ("schedule.eval_other_tasks", "true")], None),
])
def test_preflight_table(overrides, message):
    cfg = resolve(None, overrides)
    if message is None:
        preflight(cfg)
        return
    with pytest.raises(PreflightError, match=message):
        preflight(cfg)


@pytest.mark.parametrize("task,data_dir,expected", [
    ("ifollow", None, {"ifollow-heldout": None}),
    ("toolcall", None, {"bfcl-v4": None}),
])
def test_benchmarks_default_to_the_tasks_own(task, data_dir, expected):
    assert preflight(resolve(None, [("task", task)])).benchmarks == expected


def test_text2sql_with_spider_evaluates_spider_dev(tmp_path):
    (tmp_path / "dev.json").write_text("[]")
    (tmp_path / "train_spider.json").write_text("[]")
    plan = preflight(resolve(None, [("task", "text2sql"), ("task.data_dir", str(tmp_path))]))
    assert plan.benchmarks == {"spider-dev": str(tmp_path)}
    from harness.preflight import plan_benchmarks
    from tasks.registry import make_task

    assert plan_benchmarks(make_task("text2sql"), resolve(None, [("task", "text2sql")])) == {}
    with pytest.raises(PreflightError, match="--task.data_dir: text2sql has no built-in data"):
        preflight(resolve(None, [("task", "text2sql")]))  # caught before any model loads


def test_a_run_failing_mid_step_is_marked_failed(tmp_path, monkeypatch):
    register()
    from harness.training.run_loop import RunLoop

    def broken_step(self, n, *args, **kwargs):
        raise RuntimeError("verifier exploded at step 1")

    monkeypatch.setattr(RunLoop, "run_step", broken_step)
    from harness.runner import run

    with pytest.raises(RuntimeError, match="exploded"):
        run(tiny_config(str(tmp_path / "rec"), algo="grpo", steps=1))
    prov = load_record(tmp_path / "rec")["provenance"]
    assert prov["status"] == "failed" and "verifier exploded at step 1" in prov["failure"]


def _run_tiny(task: str, root: Path, *extra: str) -> dict:
    args = ["run", "--task", task, "--model", "tiny-random", "--algo", "grpo", "--schedule.steps", "1",
            "--sampling.prompts_per_step", "1", "--sampling.group_size", "2", "--sampling.max_new_tokens", "8",
            "--schedule.eval_limit", "2", "--schedule.eval_max_new_tokens", "8", "--output.dir", str(root), *extra]
    assert cli.main(args) == 0
    return load_record(root)


def test_toolcall_run_ends_with_bfcl(tmp_path):
    rec = _run_tiny("toolcall", tmp_path / "tc")
    assert list(rec["eval"]["benchmarks"]) == ["bfcl-v4"]
    assert rec["eval"]["benchmarks"]["bfcl-v4"]["cases"] == 2


@pytest.mark.skipif(not os.environ.get("MRBENCH_DATA_DIR"), reason="needs MRBENCH_DATA_DIR (Spider)")
def test_text2sql_run_ends_with_spider_dev(tmp_path):
    spider = os.path.join(os.environ["MRBENCH_DATA_DIR"], "spider")
    rec = _run_tiny("text2sql", tmp_path / "sql", "--task.data_dir", spider, "--task.limit", "4")
    bench = rec["eval"]["benchmarks"]
    assert [n for n in bench if not n.endswith("_average")] == ["spider-dev"] and bench["spider-dev"]["cases"] == 2
