import json
import multiprocessing
import os

import pytest

from harness.config import resolve
from harness.leaderboard import build_leaderboard
from harness.records import RecordError, RunRecord, atomic_write_text, find_records, load_record, read_jsonl


def _cfg(tmp_path, **extra):
    pairs = [("output.root", str(tmp_path / "results"))] + list(extra.items())
    return resolve(None, pairs)


def test_record_directory_layout(tmp_path):
    cfg = _cfg(tmp_path, model="Qwen/Qwen2.5-1.5B-Instruct", seed="2", task="toolcall", algo="gdpo")
    rec = RunRecord.open(cfg)
    assert rec.path == tmp_path / "results" / "toolcall" / "gdpo" / "qwen2.5-1.5b-instruct" / "seed2"
    assert json.loads((rec.path / "config.json").read_text())["seed"] == 2
    rec.start(seed=2, task_version="1", data_hash="abc")
    prov = rec.provenance()
    assert prov["status"] == "running" and prov["task_version"] == "1" and prov["data_hash"] == "abc"
    assert "commit" in prov["git"] and prov["versions"]["python"]
    rec.append_metrics({"step": 1, "reward/format": 0.5})
    rec.append_metrics({"step": 2, "reward/format": 0.75})
    with pytest.raises(RecordError, match="step 2 after step 2"):
        rec.append_metrics({"step": 2})
    rec.finish({"steps": 2})
    assert rec.finished
    rec.unlock()
    loaded = load_record(rec.path)
    assert [m["step"] for m in loaded["metrics"]] == [1, 2]


def test_truncate_metrics_for_resume(tmp_path):
    rec = RunRecord.open(_cfg(tmp_path))
    for step in (1, 2, 3):
        rec.append_metrics({"step": step})
        rec.append_samples([{"step": step, "response": "x"}])
    rec.truncate_metrics(2)
    assert [m["step"] for m in rec.metrics()] == [1, 2]
    assert [s["step"] for s in read_jsonl(rec.path / "samples.jsonl")] == [1, 2]
    rec.unlock()


def _try_open(cfg_json, queue):
    from harness.config import from_dict

    try:
        RunRecord.open(from_dict(json.loads(cfg_json)))
        queue.put("opened")
    except RecordError as exc:
        queue.put(str(exc))


@pytest.mark.timeout(900)  # the child's answer may take up to 600 s
def test_two_runs_never_write_the_same_directory(tmp_path):
    cfg = _cfg(tmp_path)
    rec = RunRecord.open(cfg)
    queue = multiprocessing.get_context("spawn").Queue()
    proc = multiprocessing.get_context("spawn").Process(target=_try_open, args=(cfg.to_json(), queue))
    proc.start()
    told = queue.get(timeout=600)  # the child's answer (a state), however long a spawned interpreter takes
    proc.join(60)
    assert "another run is writing this record" in told
    rec.unlock()


def test_different_config_in_same_directory_is_refused(tmp_path):
    RunRecord.open(_cfg(tmp_path)).unlock()
    other = _cfg(tmp_path, **{"optim.lr": "0.5"})
    with pytest.raises(RecordError, match="different configuration"):
        RunRecord.open(other)


def test_corrupt_and_truncated_records_are_reported(tmp_path):
    rec = RunRecord.open(_cfg(tmp_path))
    rec.start(seed=0, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1})
    with open(rec.path / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 2, "rew')  # a write cut short
    with pytest.raises(RecordError, match=r"metrics.jsonl, line 2: corrupt or truncated"):
        load_record(rec.path)
    (rec.path / "provenance.json").write_text("{not json")
    with pytest.raises(RecordError, match="provenance.json: corrupt JSON"):
        load_record(rec.path)
    rec.unlock()


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "a" / "f.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text() == "two"
    assert os.listdir(target.parent) == ["f.json"]


def _finished_record(tmp_path, algo, seed, acc):
    cfg = _cfg(tmp_path, algo=algo, seed=str(seed), task="toolcall")
    rec = RunRecord.open(cfg)
    rec.start(seed=seed, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward/format": acc / 2})
    rec.write_eval({"benchmarks": {"bfcl-v4": {"summary": {"overall": acc}, "table": "", "cases": 3, "skipped": 0}}})
    rec.finish({})
    rec.unlock()


def test_leaderboard_mean_and_std_over_seeds(tmp_path):
    _finished_record(tmp_path, "gdpo", 0, 0.5)
    _finished_record(tmp_path, "gdpo", 1, 0.7)
    _finished_record(tmp_path, "mrtpo", 0, 0.8)
    unfinished = RunRecord.open(_cfg(tmp_path, algo="grpo", task="toolcall"))
    unfinished.start(seed=0, task_version="1", data_hash="x")
    unfinished.unlock()
    assert len(find_records(tmp_path / "results")) == 4
    table = build_leaderboard(tmp_path / "results", tmp_path / "lb.md")
    lines = table.splitlines()
    gdpo = next(line for line in lines if "| gdpo |" in line)
    assert "| 2 |" in gdpo and "0.6 ± 0.14" in gdpo
    mrtpo = next(line for line in lines if "| mrtpo |" in line)
    assert "| 1 |" in mrtpo and "0.8" in mrtpo
    assert "not finished" in table
    assert (tmp_path / "lb.md").read_text().startswith("| task |")


def test_leaderboard_keeps_two_configurations_of_one_algorithm_apart_and_says_so(tmp_path):
    for seed, acc in ((0, 0.5), (1, 0.7)):
        _finished_record(tmp_path, "mrtpo", seed, acc)
    cfg = _cfg(tmp_path, algo="mrtpo", seed="0", task="toolcall", **{"schedule.steps": "16",
                                                                        "output.dir": str(tmp_path / "long")})
    rec = RunRecord.open(cfg)
    rec.start(seed=0, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward/format": 0.1})
    rec.write_eval({"benchmarks": {"bfcl-v4": {"summary": {"overall": 0.9}, "table": "", "cases": 3, "skipped": 0}}})
    rec.finish({})
    rec.unlock()
    table = build_leaderboard(tmp_path)
    rows = [line for line in table.splitlines() if line.startswith("| toolcall | mrtpo")]
    assert len(rows) == 2, table
    short = next(r for r in rows if "steps=16" not in r)
    long = next(r for r in rows if " steps=16)" in r)
    assert "| 2 |" in short and "0.6 ± 0.14" in short and "| 1 |" in long and "0.9" in long
    assert "merged" in table and "seeds 0, 1" in table
    kept = table.split("kept apart", 1)[1]
    assert "toolcall / mrtpo" in kept and "schedule.steps" in kept
