"""The checkpoint's rename runs beside the next step (issue 49): :func:`checkpoint.write` leaves the
previous checkpoint in place, :class:`checkpoint.Renaming` puts the new one there in a thread and
then records its step, a failed rename is raised where the run waits, and a run never ends, stops or
saves again with a rename still pending. The export asks accelerate no question that imports DeepSpeed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from toy_task import register, sigterm_after_step, tiny_config, train_run

from harness.backends import checkpoint
from harness.backends.local_engine import LocalEngine

ROOT = Path(__file__).resolve().parent.parent


def _write(directory: Path, step: int) -> checkpoint.Written:
    torch.manual_seed(step)
    model = torch.nn.Linear(3, 3)
    return checkpoint.write(directory, step=step, model=model, optimizer=None, data_position=step,
                            fingerprint="f")


def test_a_written_checkpoint_is_in_place_only_once_its_rename_is_done(tmp_path):
    checkpoint.save(tmp_path, step=1, model=torch.nn.Linear(3, 3), optimizer=None, data_position=1, fingerprint="f")
    written = _write(tmp_path, 2)
    assert written.tmp.exists() and written.tmp.parent == tmp_path
    assert torch.load(tmp_path / checkpoint.STATE_FILE, weights_only=True)["step"] == 1  # the previous one
    assert json.loads((tmp_path / checkpoint.STEP_FILE).read_text()) == {"step": 1}
    assert checkpoint.Renaming(written).wait() == tmp_path / checkpoint.STATE_FILE
    assert not written.tmp.exists()
    assert checkpoint.load(tmp_path)["step"] == 2 and checkpoint.load(tmp_path)["data_position"] == 2
    assert json.loads((tmp_path / checkpoint.STEP_FILE).read_text()) == {"step": 2}


def test_a_ctrl_c_while_waiting_still_waits_for_the_rename_then_is_raised(tmp_path):
    renaming = checkpoint.Renaming(_write(tmp_path, 1))
    renaming.wait()

    class Interrupted:  # the rename's thread, joined under a Ctrl-C the first time
        joins = 0

        def is_alive(self):
            return self.joins < 2

        def join(self):
            self.joins += 1
            if self.joins == 1:
                raise KeyboardInterrupt

    renaming.thread = thread = Interrupted()
    with pytest.raises(KeyboardInterrupt):
        renaming.wait()
    assert thread.joins == 2


def test_a_failed_rename_is_raised_by_wait_and_leaves_no_temporary_file(tmp_path):
    written = _write(tmp_path, 1)
    (tmp_path / checkpoint.STATE_FILE).mkdir()  # a directory where the file goes: the rename fails
    (tmp_path / checkpoint.STATE_FILE / "x").write_text("x")
    renaming = checkpoint.Renaming(written)
    with pytest.raises(OSError):
        renaming.wait()
    assert not written.tmp.exists() and not (tmp_path / checkpoint.STEP_FILE).exists()


@pytest.fixture
def renames(monkeypatch, tmp_path):
    """In order, the step of each checkpoint under ``tmp_path`` whose rename started, and of each whose
    rename was waited for (a run's first training may also run the numerics probe's two one-step
    trainings, in records of their own: not counted)."""
    events: list[tuple[str, int]] = []
    real_init, real_wait = checkpoint.Renaming.__init__, checkpoint.Renaming.wait

    def ours(written):
        return written.path.is_relative_to(tmp_path)

    def init(self, written):
        if ours(written):
            events.append(("start", written.step))
        real_init(self, written)

    def wait(self):
        path = real_wait(self)
        if ours(self.written):
            events.append(("done", self.written.step))
        return path

    monkeypatch.setattr(checkpoint.Renaming, "__init__", init)
    monkeypatch.setattr(checkpoint.Renaming, "wait", wait)
    return events


def _cfg(tmp: Path, every: int):
    register()
    return tiny_config(str(tmp), "grpo", steps=4, model__dtype="bfloat16", schedule__checkpoint_every=every)


def test_a_run_waits_for_each_rename_before_the_next_save_and_before_it_returns(tmp_path, renames):
    backend, rec, _ = train_run(_cfg(tmp_path / "run", every=1), finish=True)
    assert renames == [("start", 1), ("done", 1), ("start", 2), ("done", 2), ("start", 3), ("done", 3),
                       ("start", 4), ("done", 4)]
    assert backend._renaming is None
    directory = rec.path / "checkpoint"
    assert checkpoint.load(directory)["step"] == 4
    assert json.loads((directory / checkpoint.STEP_FILE).read_text()) == {"step": 4}
    assert not list(directory.glob(f".{checkpoint.STATE_FILE}.tmp-*"))


def test_a_stop_by_signal_waits_for_its_checkpoints_rename(tmp_path, monkeypatch, renames):
    sigterm_after_step(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        train_run(_cfg(tmp_path / "run", every=0), finish=True)
    assert renames == [("start", 2), ("done", 2)]
    assert checkpoint.load(tmp_path / "run" / "checkpoint")["step"] == 2


def test_the_engine_waits_for_the_pending_rename_before_the_next_write(tmp_path, monkeypatch):
    order: list[str] = []
    monkeypatch.setattr(checkpoint, "write", lambda directory, **kw: order.append(f"write {kw['step']}") or kw["step"])

    class Pending:
        def __init__(self, step):
            self.step = step

        def wait(self):
            order.append(f"wait {self.step}")

    monkeypatch.setattr(checkpoint, "Renaming", Pending)
    engine = LocalEngine.__new__(LocalEngine)
    engine._renaming = None
    engine.cfg = _cfg(tmp_path, every=1)
    engine.policy, engine.update = None, type("U", (), {"optimizer": None})()
    monkeypatch.setattr(LocalEngine, "_fingerprint", lambda self, record: "f")
    record = type("R", (), {"checkpoint_dir": tmp_path})()
    engine.save(record, 1, 0)
    engine.save(record, 2, 0)
    engine.checkpoint_written()
    engine.checkpoint_written()  # nothing pending: nothing to wait for
    assert order == ["write 1", "wait 1", "write 2", "wait 2"]


def test_a_failed_rename_while_the_run_stops_on_another_error_is_said_not_raised(tmp_path, capsys):
    class Failed:
        written = checkpoint.Written(tmp_path / "t", tmp_path / "state.pt", 3)

        def wait(self):
            raise OSError("no such directory")

    engine = LocalEngine.__new__(LocalEngine)
    engine._renaming = Failed()
    engine.checkpoint_written(during=RuntimeError("the step failed"))
    assert engine._renaming is None
    assert ("mrbench: the checkpoint after step 3 was not put in place (OSError: no such directory); "
            "the previous one stays") in capsys.readouterr().err
    engine._renaming = Failed()
    with pytest.raises(OSError):  # no other error: the rename's is the run's
        engine.checkpoint_written()


def test_the_export_imports_no_deepspeed(tmp_path):
    """accelerate's unwrap imports DeepSpeed wherever it is installed; the export asks without it, in a
    fresh process, and puts accelerate's question back afterwards."""
    code = f"""
import importlib.util, json, sys
from harness.models import tiny_model
from harness.backends.export import save_model
from accelerate.utils import other
asked = other.is_deepspeed_available
loaded = tiny_model()
save_model(loaded.model, loaded.tokenizer, {str(tmp_path)!r})
print(json.dumps({{"imported": "deepspeed" in sys.modules, "installed": importlib.util.find_spec("deepspeed") is not None,
                  "restored": other.is_deepspeed_available is asked}}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert (tmp_path / "model" / "model.safetensors").exists() and seen["restored"]
    if not seen["installed"]:
        pytest.skip("DeepSpeed is not installed (scripts/setup.sh --dev installs it): nothing the export could import")
    assert not seen["imported"]
