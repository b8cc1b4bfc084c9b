"""`mrbench run` end to end on the tiny random model and the real ifollow task (generated prompts)."""

import json

from harness import cli
from harness.records import load_record


def _args(root):
    return ["run", "--model", "tiny-random", "--algo", "mrtpo", "--output.root", str(root),
            "--schedule.steps", "2", "--sampling.prompts_per_step", "1", "--sampling.group_size", "4",
            "--sampling.max_new_tokens", "12", "--schedule.eval_limit", "2", "--schedule.eval_max_new_tokens", "8",
            "--algo.warmup_steps", "0"]


def test_run_writes_a_finished_record_with_eval_and_is_not_rerun(tmp_path, capsys):
    assert cli.main(_args(tmp_path)) == 0
    out = capsys.readouterr().out
    path = tmp_path / "ifollow" / "mrtpo" / "tiny-random" / "seed0"
    assert f"record: {path}" in out
    rec = load_record(path)
    assert rec["provenance"]["status"] == "finished"
    assert [m["step"] for m in rec["metrics"]] == [1, 2]
    params = rec["config"]["algo"]["params"]  # what ran: every parameter, defaults filled in
    assert params["warmup_steps"] == 0 and params["beta"] == 0.5 and params["rescale"] == "paper"
    options = rec["config"]["task"]["options"]  # the task's constructor arguments, defaults filled in
    assert options["min_constraints"] == 5 and options["max_constraints"] == 7 and options["loose"] is False
    assert "algorithm" not in rec["provenance"]  # configuration lives in config.json only
    reward_keys = [k for k in rec["metrics"][0] if k.startswith("reward/")]
    assert reward_keys and not any(k.startswith("reward/c0:") for k in reward_keys)  # aggregated by type
    bench = rec["eval"]["benchmarks"]["ifollow-heldout"]
    assert bench["cases"] == 2 and 0.0 <= bench["summary"]["instruction_level"] <= 1.0
    assert not (path / "checkpoint").exists()  # dropped once finished (output.keep_checkpoint false)
    samples = [json.loads(line) for line in (path / "samples.jsonl").read_text().splitlines()]
    assert samples and all("response" in s or "text" in s for s in samples)

    assert cli.main(_args(tmp_path)) == 0
    assert "already finished; not rerunning" in capsys.readouterr().out
    # the defaults given explicitly are the same configuration, hence the same finished run
    assert cli.main(_args(tmp_path) + ["--algo.beta", "0.5", "--algo.rescale", "paper", "--algo.bound", "true"]) == 0
    assert "already finished; not rerunning" in capsys.readouterr().out
    assert cli.main(_args(tmp_path) + ["--task.options.min_constraints", "5", "--task.options.loose", "false"]) == 0
    assert "already finished; not rerunning" in capsys.readouterr().out
    assert cli.main(_args(tmp_path) + ["--task.options.min_constraints", "4"]) == 2  # another value: another run
    assert "holds a record of a different configuration" in capsys.readouterr().err
    assert [m["step"] for m in load_record(path)["metrics"]] == [1, 2]
