"""Leaderboard and report row labels name only what really differs between rows (issue 36, finding 7):
a field that an older record lacks, and that a newer record holds at its default, is no difference
(no ``no_signal_steps=default`` against ``2``); real differences are named by their shortest
unambiguous key (``steps=16``, not ``schedule.steps=16``)."""

from __future__ import annotations

import json

from harness.config import resolve
from harness.leaderboard import build_leaderboard
from harness.records import RunRecord
from harness.report.collect import collect, group_runs, short_names

FIELDS_AN_OLD_RECORD_LACKS = (("schedule", "no_signal_steps"), ("schedule", "stop_without_signal"))


def _record(root, seed, acc, *, old=False, **settings):
    pairs = [("output.root", str(root)), ("algo", "mrtpo"), ("seed", str(seed)), ("task", "toolcall"),
             *settings.items()]
    if settings:
        pairs.append(("output.dir", str(root / f"other-{seed}")))
    rec = RunRecord.open(resolve(None, pairs))
    rec.start(seed=seed, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward/format": acc / 2})
    rec.write_eval({"benchmarks": {"bfcl-v4": {"summary": {"overall": acc}, "table": "", "cases": 3, "skipped": 0}}})
    rec.finish({})
    rec.unlock()
    if old:  # written before these fields existed
        config = json.loads((rec.path / "config.json").read_text())
        for section, name in FIELDS_AN_OLD_RECORD_LACKS:
            config[section].pop(name)
        (rec.path / "config.json").write_text(json.dumps(config))
    return rec.path


def test_a_field_an_older_record_lacks_at_its_default_is_no_difference(tmp_path):
    _record(tmp_path, 0, 0.5, old=True)
    _record(tmp_path, 1, 0.7)  # the same configuration, written after the fields existed
    by_task, _ = group_runs(collect(tmp_path)[0])
    (group,) = by_task["toolcall"]
    assert group.label == "mrtpo" and group.seeds == [0, 1]
    table = build_leaderboard(tmp_path)
    assert "no_signal_steps" not in table and "default" not in table
    assert "| toolcall | mrtpo | smollm2-135m | 2 | 0.6 ± 0.14" in table


def test_labels_name_the_real_difference_by_its_short_name(tmp_path):
    _record(tmp_path, 0, 0.5, old=True)
    _record(tmp_path, 1, 0.7)
    _record(tmp_path, 0, 0.9, **{"schedule.steps": "16"})
    by_task, _ = group_runs(collect(tmp_path)[0])
    labels = sorted(g.label for g in by_task["toolcall"])  # the warm-up is sized to the run's steps
    assert labels == ["mrtpo (warmup_steps=2, steps=4)", "mrtpo (warmup_steps=8, steps=16)"]
    table = build_leaderboard(tmp_path)
    assert "no_signal_steps" not in table and "stop_without_signal" not in table
    kept = table.split("kept apart", 1)[1]
    assert "schedule.steps (4 / 16)" in kept or "schedule.steps (16 / 4)" in kept


def test_short_names_stay_unambiguous():
    names = short_names(["schedule.eval_limit", "model.name", "task.name", "sampling.max_new_tokens", "schedule.eval_max_new_tokens",
                         "a.x", "b.x", "algo.params.beta"])
    assert names == {"schedule.eval_limit": "eval_limit", "sampling.max_new_tokens": "max_new_tokens",
                     "schedule.eval_max_new_tokens": "eval_max_new_tokens", "a.x": "a.x", "b.x": "b.x",
                     "algo.params.beta": "beta", "model.name": "model.name", "task.name": "task.name"}
