"""Checkpoints cost what they must (reliability probe 4, D1): by default a run checkpoints at the
end and on SIGTERM/SIGINT only (``schedule.checkpoint_every`` 0, an execution field: resume is exact
from any checkpoint), its final checkpoint holds no optimiser state (no update follows), and
model/ is in the dtype the run decoded with. On the main job's shape (4 steps, full fine-tune,
bf16 rollout) that cuts the bytes written per run more than 4-fold; resume stays exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from toy_task import register, sigterm_after_step, tiny_config, train_run

from harness import runner
from harness.backends import checkpoint
from harness.runner import run
from harness.training.run_loop import RunLoop


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _cfg(tmp: Path, **kw):
    register()
    base = {"model__dtype": "bfloat16", "schedule__checkpoint_every": 0, **kw}
    return tiny_config(str(tmp), "grpo", steps=4, **base)


@pytest.fixture
def written(monkeypatch, tmp_path):
    """Bytes of every checkpoint written under ``tmp_path``, in order (not those of the numerics
    probe's one-step trainings, which a run's first training may run in records of their own)."""
    sizes: list[int] = []
    real = checkpoint.write

    def write(directory, **kw):
        written = real(directory, **kw)
        if written.path.is_relative_to(tmp_path):
            sizes.append(written.tmp.stat().st_size)
        return written

    monkeypatch.setattr(checkpoint, "write", write)
    return sizes


def test_the_default_cadence_writes_a_quarter_of_the_bytes_or_less(tmp_path, written):
    cfg = _cfg(tmp_path / "run")
    cfg.schedule.checkpoint_every = type(cfg.schedule)().checkpoint_every  # the default
    backend, rec, _ = train_run(cfg, finish=True)
    after = sum(written) + _dir_bytes(rec.path / "model")
    assert len(written) == 1  # the final checkpoint only
    # before: a full checkpoint (weights + AdamW moments) after each of the 4 steps, model/ in float32
    full = checkpoint.save(tmp_path / "full", step=4, model=backend.policy, optimizer=backend.update.optimizer,
                           data_position=0, fingerprint="f").stat().st_size
    weights = rec.path / "model" / "model.safetensors"
    fp32_export = _dir_bytes(rec.path / "model") + weights.stat().st_size  # bf16 -> float32 doubles the weights
    before = 4 * full + fp32_export
    print(f"bytes written: before {before}, after {after} ({before / after:.1f}x fewer)")
    assert before / after >= 4
    assert json.loads((rec.path / "model" / "export.json").read_text())["dtype"] == "bfloat16"


def _metrics(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if not k.startswith("time_")}
            for x in (path / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    assert run(_cfg(out)) == 0
    return _metrics(out), json.loads((out / "eval.json").read_text())["benchmarks"]


def test_a_sigterm_mid_run_checkpoints_and_resumes_exactly(tmp_path, monkeypatch, straight):
    original = sigterm_after_step(monkeypatch, 1)
    cfg = _cfg(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        run(cfg)
    state = checkpoint.load(tmp_path / "run" / "checkpoint")
    assert state["step"] == 2 and "optimizer" in state
    monkeypatch.setattr(RunLoop, "run_step", original)
    assert run(_cfg(tmp_path / "run")) == 0
    assert _metrics(tmp_path / "run") == straight[0]


def test_a_kill_during_evaluation_resumes_from_the_final_checkpoint_without_training(tmp_path, monkeypatch,
                                                                                     straight):
    real_eval = runner.end_of_run_eval

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(runner, "end_of_run_eval", killed)
    with pytest.raises(KeyboardInterrupt):
        run(_cfg(tmp_path / "run"))
    state = checkpoint.load(tmp_path / "run" / "checkpoint")
    assert state["step"] == 4 and "optimizer" not in state  # the final checkpoint: weights, RNG, position
    monkeypatch.setattr(runner, "end_of_run_eval", real_eval)
    steps = []
    original = RunLoop.run_step
    monkeypatch.setattr(RunLoop, "run_step", lambda self, n, *a, **k: steps.append(n) or original(self, n, *a, **k))
    assert run(_cfg(tmp_path / "run")) == 0
    assert steps == []  # nothing trained again
    assert _metrics(tmp_path / "run") == straight[0]
    assert json.loads((tmp_path / "run" / "eval.json").read_text())["benchmarks"] == straight[1]


def test_a_final_checkpoint_cannot_resume_a_run_with_steps_left(tmp_path):
    model = torch.nn.Linear(2, 2)
    checkpoint.save(tmp_path / "c", step=2, model=model, optimizer=None, data_position=0, fingerprint="f")
    assert "optimizer" not in checkpoint.load(tmp_path / "c")
