"""``mrbench run --dry-run`` on the local backend says what would run: steps, batch, beta per step,
benchmarks and an expected time from the documented rule of thumb; missing data is caught before any
model loads, naming the flag that fixes it."""

from __future__ import annotations

import pytest

from harness import cli
from harness.config import resolve
from harness.run_plan import EVAL_S_PER_TOKEN, TRAIN_S_PER_TOKEN, expected_seconds, model_millions


@pytest.mark.parametrize("name, millions", [
    ("smollm2-135m", 135.0), ("tiny-random", 0.1), ("tiny-random-3", 0.1),
    ("Qwen/Qwen2.5-1.5B-Instruct", 1500.0), ("Qwen/Qwen2.5-7B-Instruct", 7000.0),
    ("HuggingFaceTB/SmolLM2-360M-Instruct", 360.0), ("Qwen/Qwen3-4B-Instruct-2507", 4000.0),
    ("./my-model", None), ("gpt2", None),
])
def test_model_size_from_the_name(name, millions):
    assert model_millions(name) == millions


def test_rule_of_thumb_by_hand():
    cfg = resolve()  # 2 prompts x 8 responses x 96 tokens, 8 eval cases x 128 tokens, SmolLM2-135M
    train, evaluation = expected_seconds(cfg, 4, {"ifollow-heldout": (8, 128)})
    assert train == pytest.approx(TRAIN_S_PER_TOKEN * 16 * 96 * 4)
    assert evaluation == pytest.approx(EVAL_S_PER_TOKEN * 8 * 128)
    big = resolve(None, [("model", "Qwen/Qwen2.5-1.5B-Instruct")])
    assert expected_seconds(big, 4, {"ifollow-heldout": (8, 128)})[0] == pytest.approx(train * 1500 / 135)


def test_dry_run_of_the_main_job_says_what_would_run(tmp_path, capsys):
    assert cli.main(["run", "--dry-run", "--output.root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cell: task ifollow, algorithm mrtpo, model smollm2-135m, seed 0, backend local" in out
    assert f"record: {tmp_path}/ifollow/mrtpo/smollm2-135m/seed0 (new)" in out
    assert "steps: 4, each 2 prompts x 8 responses = 16 responses of at most 96 tokens" in out
    assert "effective beta per step: 0 0.25 0.5 0.5" in out
    assert ("end-of-run benchmarks: ifollow-heldout (8 cases, at most 128 tokens each; ifollow-heldout: 8 cases "
            "of up to 128 tokens)") in out
    assert "expected time: about 2.2 min of training for 4 step(s) + 6 s of evaluation" in out
    assert not any(tmp_path.iterdir())  # nothing written


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
