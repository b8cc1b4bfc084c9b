"""Records written before ``config.json`` stored resolved algorithm parameters (the committed
fixtures under ``fixtures/old_records``, params as given) still read, report and resume, and an
explicit default is the same configuration as an omitted one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from harness.records import load_record, same_configuration
from harness.report.collect import collect, group_runs
from harness.resolved import resolved_config

FIXTURES = Path(__file__).parent / "fixtures" / "old_records"
#: the command line that wrote both fixtures (fixtures/old_records/README.md)
FIXTURE_ARGS = ["run", "--model", "tiny-random", "--task", "toolcall", "--algo", "mrtpo", "--algo.warmup_steps", "0",
                "--schedule.steps", "2", "--sampling.max_new_tokens", "8", "--sampling.group_size", "2",
                "--schedule.eval_limit", "2", "--schedule.eval_max_new_tokens", "8", "--schedule.log_samples", "1",
                "--output.credit_groups", "0", "--model.lora", "true", "--model.lora_r", "2",
                # the default became auto (bf16 where native) after the fixture was written: the old run's value
                "--model.train_dtype", "float32"]
EXPLICIT_DEFAULTS = ["--algo.beta", "0.5", "--algo.rescale", "paper", "--algo.bound", "true"]


def _copy(name: str, where: Path) -> Path:
    target = where / name
    shutil.copytree(FIXTURES / name, target)
    return target


def _old_config() -> dict:
    return json.loads((FIXTURES / "old-finished" / "config.json").read_text())


def test_the_fixture_is_in_the_old_format():
    rec = load_record(FIXTURES / "old-finished")
    assert rec["config"]["algo"]["params"] == {"warmup_steps": 0}  # as given
    assert rec["provenance"]["status"] == "finished" and "algorithm" in rec["provenance"]


def test_old_params_resolve_to_what_ran():
    old = _old_config()
    params = resolved_config(old)["algo"]["params"]
    assert params == {**load_record(FIXTURES / "old-finished")["provenance"]["algorithm"]}
    new = json.loads(json.dumps(old))
    new["algo"]["params"] = params
    assert same_configuration(old, new)
    other = json.loads(json.dumps(new))
    other["algo"]["params"]["beta"] = 0.25
    assert not same_configuration(old, other)



def test_old_task_options_resolve_to_the_constructors_defaults():
    from harness.resolved import non_default_task_options, resolved_task_options

    old = json.loads(json.dumps(_old_config()))
    old["task"] = {**old["task"], "name": "ifollow", "options": {}}  # as given: nothing
    resolved = resolved_config(old)["task"]["options"]
    assert resolved == {"min_constraints": 5, "max_constraints": 7, "loose": False, "default_size": 2000}
    new = json.loads(json.dumps(old))
    new["task"]["options"] = resolved
    assert same_configuration(old, new)
    new["task"]["options"]["max_constraints"] = 6
    assert not same_configuration(old, new)
    assert non_default_task_options("ifollow", new["task"]["options"]) == {"max_constraints": 6}
    # tuples as JSON reads them back; an object default (an unset sandbox limit) kept as None
    t2s = resolved_task_options("text2sql", {})
    assert t2s["filter_splits"] == ["train"] and t2s["max_prompt_tokens"] == 4096
    assert resolved_task_options("text2sql", {"filter_splits": ("train", "dev")})["filter_splits"] == ["train", "dev"]



def test_a_base_record_is_one_for_options_as_given_and_resolved():
    from harness.base_model import base_identity, digest, matches

    as_given = json.loads(json.dumps(_old_config()))
    as_given["task"] = {**as_given["task"], "name": "ifollow", "options": {}}
    resolved = resolved_config(as_given)
    assert digest(base_identity(as_given)) == digest(base_identity(resolved))  # one record, its old name kept
    assert base_identity(as_given)["task"]["options"]["min_constraints"] == 5  # its config.json: what ran
    assert matches(base_identity(as_given), resolved) and matches(base_identity(resolved), as_given)
    other = json.loads(json.dumps(resolved))
    other["task"]["options"]["loose"] = True
    assert digest(base_identity(other)) != digest(base_identity(as_given))
    assert not matches(base_identity(as_given), other)


def test_a_rerun_with_explicit_defaults_is_the_same_finished_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _copy("old-finished", tmp_path)
    assert cli.main(FIXTURE_ARGS + EXPLICIT_DEFAULTS + ["--output.dir", "old-finished"]) == 0
    assert "already finished; not rerunning" in capsys.readouterr().out
    assert json.loads((path / "config.json").read_text())["algo"]["params"] == {"warmup_steps": 0}  # untouched


def test_a_rerun_with_another_value_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _copy("old-finished", tmp_path)
    assert cli.main(FIXTURE_ARGS + ["--algo.beta", "0.25", "--output.dir", "old-finished"]) == 2
    assert "holds a record of a different configuration" in capsys.readouterr().err


def _old_and_new(root: Path) -> None:
    """The old record (params as given) and a record of the same run in the new format (params
    resolved), side by side under ``root``."""
    _copy("old-finished", root / "old")
    new = _copy("old-finished", root / "new")
    config = json.loads((new / "config.json").read_text())
    config["algo"]["params"] = resolved_config(config)["algo"]["params"]
    (new / "config.json").write_text(json.dumps(config))


def test_report_groups_an_old_record_with_a_new_one_of_the_same_configuration(tmp_path):
    """One row; the second record of seed 0 is named and left out."""
    _old_and_new(tmp_path)
    runs, problems = collect(tmp_path)
    assert len(runs) == 2 and not [p for p in problems if "not finished" in p or "corrupt" in p]
    by_task, left_out = group_runs(runs)
    assert [g.label for g in by_task["toolcall"]] == ["mrtpo"]
    assert len(left_out) == 1 and "a second record of seed 0" in left_out[0]


def test_report_command_shows_one_row(tmp_path):
    root = tmp_path / "records"
    _old_and_new(root)
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "out"), "--baseline", "mrtpo"]) == 0
    tables = json.loads((tmp_path / "out" / "leaderboard.json").read_text())["tasks"]["toolcall"]["tables"]
    assert tables and all([r["label"] for r in t["rows"]] == ["mrtpo"] for t in tables)


@pytest.mark.usefixtures("one_torch_thread")
def test_an_old_stopped_record_resumes_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _copy("old-stopped", tmp_path)
    assert cli.main(FIXTURE_ARGS + ["--output.dir", "old-stopped"]) == 0
    rec = load_record(path)
    assert rec["provenance"]["status"] == "finished"
    assert rec["provenance"]["resumed"], "resumed from the old checkpoint, not restarted"
    assert [m["step"] for m in rec["metrics"]] == [1, 2]
    first = json.loads((FIXTURES / "old-stopped" / "metrics.jsonl").read_text().splitlines()[0])
    assert rec["metrics"][0] == first  # step 1 is the old run's, kept
    assert rec["config"]["algo"]["params"] == {"warmup_steps": 0}  # config.json keeps the first run's
