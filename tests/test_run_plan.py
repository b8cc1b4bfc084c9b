"""``mrbench run --dry-run`` on the local backend says what would run: steps, batch, beta per step,
benchmarks and an expected time from a speed it measures on the spot (injected here as a fake, so the
figures are deterministic); missing data is caught before any model loads, naming the flag that fixes it."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import cli, dry_run_estimate
from harness.config import resolve
from harness.dry_run_estimate import REFERENCE_GFLOPS, MachineSpeed, estimate_cell, expected, matmul_params

BF16 = [("model.dtype", "bfloat16"), ("model.train_dtype", "bfloat16")]  # the bench figures' path, on any host


def fake_speed(factor: float):
    """A probe that reads ``factor`` x the idle reference in every dtype asked for, at 2 threads."""
    def measure(threads, dtypes):
        return MachineSpeed(2, "as the fake says", {d: REFERENCE_GFLOPS[d] * factor for d in sorted(dtypes)})
    return measure


@pytest.mark.parametrize("name, millions", [
    ("smollm2-135m", 135.0), ("tiny-random", 0.1), ("tiny-random-3", 0.1),
    ("Qwen/Qwen2.5-1.5B-Instruct", 1500.0), ("Qwen/Qwen2.5-7B-Instruct", 7000.0),
    ("HuggingFaceTB/SmolLM2-360M-Instruct", 360.0), ("Qwen/Qwen3-4B-Instruct-2507", 4000.0),
    ("./my-model", None), ("gpt2", None),
])
def test_model_size_from_the_name(name, millions):
    assert dry_run_estimate.model_millions(name) == millions


def test_matrix_product_parameters_of_smollm2s_shape():
    """30 layers of 2 x 576 x 576 (q, o) + 2 x 576 x 192 (k, v: 3 KV heads of 64) + 3 x 576 x 1536
    (MLP) = 3,538,944 each, and the 49,152 x 576 LM head: 134,479,872 (bench/README: 134.5 M)."""
    config = SimpleNamespace(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                             num_key_value_heads=3, vocab_size=49152)
    assert matmul_params(config) == 30 * 3_538_944 + 49152 * 576 == 134_479_872
    assert matmul_params(SimpleNamespace(hidden_size=8)) is None


def test_estimate_scales_inversely_with_the_measured_speed_and_with_the_work():
    ref = dict(REFERENCE_GFLOPS)
    sizes = {"ifollow-heldout": (8, 128)}
    idle = expected(134_479_872, 16, 96, 4, 3, sizes, "bfloat16", "bfloat16", ref)
    busy = expected(134_479_872, 16, 96, 4, 3, sizes, "bfloat16", "bfloat16", {d: g / 3 for d, g in ref.items()})
    assert busy.training == pytest.approx(3 * idle.training) and busy.evaluation == pytest.approx(3 * idle.evaluation)
    # the idle main job is its measured phases: 18.2 + 9.8 + 26.5 + 13.1 s; eval 1 batch x 128 decoding steps
    assert (idle.generate, idle.replay, idle.update, idle.other) == pytest.approx((18.2, 9.8, 26.5, 13.1))
    assert idle.evaluation == pytest.approx(128 * 18.2 / (4 * 96))
    twice = expected(134_479_872, 32, 96, 4, 3, {"ifollow-heldout": (16, 128)}, "bfloat16", "bfloat16", ref)
    assert twice.generate == pytest.approx(2 * idle.generate) and twice.evaluation == pytest.approx(2 * idle.evaluation)
    no_replay = expected(134_479_872, 16, 96, 4, 0, sizes, "bfloat16", "bfloat16", ref)
    assert no_replay.replay == 0 and no_replay.update == idle.update
    # the update follows the update's dtype and its measured speed only
    slow_update = expected(134_479_872, 16, 96, 4, 3, sizes, "bfloat16", "float32", {**ref, "float32": ref["float32"] / 2})
    assert slow_update.update == pytest.approx(2 * 60.2) and slow_update.generate == pytest.approx(idle.generate)


def _bench_main_job_seconds() -> float:
    text = (Path(__file__).resolve().parents[1] / "bench" / "README.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| the main job's training seconds, default path"))
    return float(re.search(r"\*\*([0-9.]+) s\*\*", row).group(1))


def test_the_main_job_at_the_idle_speed_lands_within_1_5x_of_its_measured_time():
    """bench/README's measured training seconds of the main job (idle two-core machine, bf16 path)
    against the dry run's estimate for the main job's config at the probe's idle reading."""
    from harness.preflight import preflight

    cfg = resolve(None, BF16)
    plan = preflight(cfg, environment=False)
    times, speed = estimate_cell(cfg, plan.algorithm, 0, {}, fake_speed(1.0))
    measured = _bench_main_job_seconds()
    assert measured / 1.5 <= times.training <= measured * 1.5
    assert speed.gflops == {"bfloat16": REFERENCE_GFLOPS["bfloat16"]}
    # the replay is counted on the 3 steps that replay (beta 0 at step 1), none for grpo
    assert times.replay == pytest.approx(9.8)
    grpo = resolve(None, BF16 + [("algo", "grpo")])
    assert estimate_cell(grpo, preflight(grpo, environment=False).algorithm, 0, {}, fake_speed(1.0))[0].replay == 0


def test_dry_run_of_the_main_job_says_what_would_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(dry_run_estimate, "measure_speed", fake_speed(0.5))  # a machine at half its idle speed
    assert cli.main(["run", "--dry-run", "--output.root", str(tmp_path), "--model.dtype", "bfloat16",
                     "--model.train_dtype", "bfloat16"]) == 0
    out = capsys.readouterr().out
    assert "cell: task ifollow, algorithm mrtpo, model smollm2-135m, seed 0, backend local" in out
    assert f"record: {tmp_path}/ifollow/mrtpo/smollm2-135m/seed0 (new)" in out
    assert "steps: 4, each 2 prompts x 8 responses = 16 responses of at most 96 tokens" in out
    assert "effective beta per step: 0 0.25 0.5 0.5" in out
    assert ("end-of-run benchmarks: ifollow-heldout (8 cases, at most 128 tokens each; ifollow-heldout: 8 cases "
            "of up to 128 tokens)") in out
    # twice the idle main job's 67.6 s, and twice its 6 s of evaluation
    assert "expected time: about 2.3 min of training for 4 step(s) + 12 s of evaluation at this machine's present" in out
    assert "this machine now: 450 GFLOP/s in bfloat16 (idle reference 900) at 2 thread(s), as the fake says" in out
    assert "the run re-estimates from its own steps as they are timed, after its first step" in out
    assert not any(tmp_path.iterdir())  # nothing written


def test_dry_run_measures_the_machine_quickly_without_loading_weights(monkeypatch, capsys):
    """The real probe: a positive figure at the thread count the run would use, no model loaded."""
    from harness import models

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", no_loading)
    assert cli.main(["run", "--dry-run", "--model", "tiny-random", "--schedule.steps", "1"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("this machine now: "))
    assert float(line.split()[3]) > 0 and " thread(s), " in line


def test_dry_run_of_a_full_recipe_says_what_its_evaluation_will_cost(capsys):
    """toolcall-paper evaluates every BFCL case at the benchmark's own length: the dry run counts them,
    costs them, and says the run will cap them to schedule.eval_max_minutes."""
    assert cli.main(["run", "--dry-run", "--config", "toolcall-paper"]) == 0
    out = capsys.readouterr().out
    from evals.registry import make_evaluator

    bfcl = make_evaluator("bfcl-v4")
    n = len(bfcl.cases())
    assert f"bfcl-v4: {n} cases of up to {bfcl.max_new_tokens} tokens" in out
    assert "of evaluation (more than schedule.eval_max_minutes 60: the run will cost it on this machine" in out


def test_dry_run_of_an_unknown_size_says_so(capsys):
    assert cli.main(["run", "--dry-run", "--model", "some/model", "--algo", "gdpo"]) == 0
    out = capsys.readouterr().out
    assert "expected time: unknown" in out and "effective beta" not in out


def test_missing_training_data_is_caught_before_any_model_loads(monkeypatch, capsys):
    from harness import models

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(models, "load_model", no_loading)
    assert cli.main(["run", "--task", "text2sql"]) == 2
    err = capsys.readouterr().err
    assert "--task.data_dir" in err and "spider/train_spider.json" in err and "--data-dir" not in err.split(";")[0]
    assert cli.main(["run", "--task.data_dir", "/no/such/folder"]) == 2
    assert "/no/such/folder: no such file or folder" in capsys.readouterr().err


def test_list_names_the_models(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    models = out[out.index("models:"):]
    assert "smollm2-135m" in models and "tiny-random[-SEED]" in models and "(tested)" in models
    assert "Qwen/Qwen2.5-1.5B-Instruct" in models and "toolcall-paper" in models
    assert "any hub id" in models and "local directory" in models


def test_benchmarks_without_their_data_are_named_before_training(tmp_path, monkeypatch, capsys):
    """A recipe's end-of-run benchmarks without their data (newcomer review 5, finding 2): the dry run
    and the run say so in one line before any step, naming --schedule.eval_data_dir; the run's
    "not run" line after training names it too, not mrbench eval's --data-dir."""
    monkeypatch.setattr(dry_run_estimate, "measure_speed", fake_speed(1.0))
    args = ["run", "--model", "tiny-random", "--algo", "gdpo", "--schedule.steps", "1", "--sampling.prompts_per_step",
            "1", "--sampling.group_size", "2", "--sampling.max_new_tokens", "4", "--schedule.eval_benchmarks",
            "[ifeval, ifollow-heldout]", "--schedule.eval_limit", "1", "--output.dir", str(tmp_path / "rec")]
    assert cli.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    warning = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "end-of-run benchmark(s) ifeval will not run" in warning[0]
    assert "--schedule.eval_data_dir DIR" in warning[0] and "--data-dir DIR with" not in warning[0]
    assert "ifeval: 0 cases" not in out and "ifollow-heldout: 1 cases" in out
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    said = [line for line in captured.err.replace("\r", "\n").splitlines() if "will not run" in line]
    assert len(said) == 1 and said[0].startswith("mrbench run: warning: end-of-run benchmark(s) ifeval")
    assert captured.err.index("will not run") < captured.err.index("step")  # before the first step's bar
    not_run = next(line for line in captured.out.splitlines() if "eval ifeval: not run" in line)
    assert "--schedule.eval_data_dir" in not_run and "--data-dir" not in not_run.replace("eval_data_dir", "")


def test_dry_run_of_a_finished_record_estimates_nothing(tmp_path, monkeypatch, capsys):
    """A finished record is not rerun, so its dry run costs no evaluation (newcomer review 5)."""
    import json

    rec = tmp_path / "rec"
    args = ["run", "--model", "tiny-random", "--schedule.steps", "1", "--output.dir", str(rec)]
    assert cli.main([*args, "--dry-run"]) == 0
    capsys.readouterr()
    rec.mkdir()
    cfg = resolve(None, [("model.name", "tiny-random"), ("schedule.steps", "1"), ("output.dir", str(rec))])
    (rec / "config.json").write_text(cfg.to_json())
    (rec / "provenance.json").write_text(json.dumps({"status": "finished"}))
    monkeypatch.setattr(dry_run_estimate, "measure_speed", lambda *a: pytest.fail("measured for nothing"))
    assert cli.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "(finished: it would not be rerun)" in out and "expected time: none: a finished record is not rerun" in out
    assert "of evaluation" not in out


def test_a_sweep_dry_run_gives_an_expected_time(tmp_path, monkeypatch, capsys):
    """``mrbench sweep --dry-run`` sums the cells that would run, as the run's dry run estimates each
    (newcomer review 5); finished cells cost nothing."""
    import yaml

    from harness.sweep.estimate import sweep_estimate
    from harness.sweep.grid import expand, load_grid

    monkeypatch.setattr(dry_run_estimate, "measure_speed", fake_speed(1.0))
    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({"root": str(tmp_path / "root"), "set": {"model.name": "smollm2-135m"},
                                    "grid": {"seed": [0, 1], "algo.name": ["gdpo", "mrtpo"]}}))
    assert cli.main(["sweep", str(grid), "--dry-run", "--jobs", "2"]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("expected time:"))
    assert "for the 4 cell(s) to run, one at a time" in line and "--jobs 2 runs 2 at a time" in line
    cells = expand(load_grid(grid))

    def minutes(text: str) -> float:
        return float(re.search(r"about ([0-9.]+) min", text).group(1))

    each = [minutes(sweep_estimate([cell], measure=fake_speed(1.0))) for cell in cells]
    assert minutes(sweep_estimate(cells, measure=fake_speed(1.0))) == pytest.approx(sum(each), abs=0.2)
    (tmp_path / "root" / cells[0].id).mkdir(parents=True)
    (tmp_path / "root" / cells[0].id / "config.json").write_text(cells[0].cfg.to_json())
    (tmp_path / "root" / cells[0].id / "provenance.json").write_text('{"status": "finished"}')
    assert "for the 3 cell(s) to run" in sweep_estimate(cells, measure=fake_speed(1.0))
