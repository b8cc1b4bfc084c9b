"""A full disk is one line naming the path and the room needed, exit code 2, the record ``failed``
and the last good checkpoint kept (reliability probe 4, D2). Where even the status cannot be
written, the next run of the command says so. The full disk is simulated at the write layer (the
probe's 50 MB tmpfs needs root): torch's writer fails as it does on a full device, with the free
space below what the checkpoint needs.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import disk_full
from harness.backends import checkpoint
from harness.config import resolve
from harness.records import RunRecord
from harness.runner import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FREE = 300_000  # bytes "free" while the device is full: less than tiny-random's checkpoint


def _cfg(tmp_path: Path):
    return resolve(None, [("model.name", "tiny-random"), ("model.dtype", "float32"), ("schedule.steps", "3"),
                          ("schedule.checkpoint_every", "1"), ("sampling.prompts_per_step", "1"),
                          ("sampling.group_size", "2"), ("sampling.max_new_tokens", "4"),
                          ("schedule.eval_limit", "1"), ("output.dir", str(tmp_path / "rec"))])


@pytest.fixture
def full_after_first_checkpoint(monkeypatch):
    """The device fills up after the step-1 checkpoint: later torch.save calls write part of their
    file and fail with torch's own error, and the free space is below what a checkpoint needs."""
    real_save, calls = torch.save, []

    def save(payload, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            return real_save(payload, path, *args, **kwargs)
        monkeypatch.setattr(disk_full, "free_bytes", lambda p: FREE)
        Path(path).write_bytes(b"\0" * 1000)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1000 vs 960")

    monkeypatch.setattr(torch, "save", save)
    return calls


def _last_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.replace("\r", "\n").splitlines() if "no space left" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_a_full_disk_is_one_line_exit_two_failed_and_the_checkpoint_kept(tmp_path, capsys, full_after_first_checkpoint):
    cfg = _cfg(tmp_path)
    assert run(cfg) == 2
    state = tmp_path / "rec" / "checkpoint" / "state.pt"
    line = _last_line(capsys.readouterr().err)
    assert line.startswith(f"mrbench run: {state}: no space left on the device (the checkpoint after step 2 needs about")
    assert f"{disk_full.human(FREE)} is free; free at least" in line and "rerun the same command" in line
    prov = json.loads((tmp_path / "rec" / "provenance.json").read_text())
    assert prov["status"] == "failed" and prov["failure"].startswith("DiskFull: ")
    assert json.loads((state.parent / "step.json").read_text()) == {"step": 1}
    assert sorted(p.name for p in state.parent.iterdir()) == ["state.pt", "step.json"]  # no temporary left
    assert len(full_after_first_checkpoint) == 2
    assert checkpoint.load(state.parent)["step"] == 1


def test_a_status_the_full_disk_refuses_is_told_by_the_next_run(tmp_path, capsys, monkeypatch,
                                                                 full_after_first_checkpoint):
    cfg = _cfg(tmp_path)
    real_fail = RunRecord.fail

    def fail(self, reason):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path / "provenance.json"))

    monkeypatch.setattr(RunRecord, "fail", fail)
    monkeypatch.setattr(disk_full, "_fail_in_place", lambda rec, reason: False)  # not even in place
    assert run(cfg) == 2
    line = _last_line(capsys.readouterr().err)
    assert "the record could not be marked failed either" in line and "the next run of this command says so" in line
    rec_dir = tmp_path / "rec"
    assert json.loads((rec_dir / "provenance.json").read_text())["status"] == "running"
    assert (rec_dir / disk_full.MARKER).exists()
    monkeypatch.setattr(RunRecord, "fail", real_fail)
    monkeypatch.undo()  # space again: the rerun says what happened, resumes and finishes
    assert run(_cfg(tmp_path)) == 0
    err = capsys.readouterr().err
    assert f"{rec_dir}: the last run of this record stopped on a full disk and could not record it" in err
    assert not (rec_dir / disk_full.MARKER).exists()
    assert [json.loads(x)["step"] for x in (rec_dir / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_a_status_with_no_room_for_a_new_file_is_written_in_place(tmp_path, capsys, monkeypatch,
                                                                  full_after_first_checkpoint):
    def fail(self, reason):  # the temporary file of the usual atomic write finds no room
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path / "provenance.json"))

    monkeypatch.setattr(RunRecord, "fail", fail)
    assert run(_cfg(tmp_path)) == 2
    assert "could not be marked" not in _last_line(capsys.readouterr().err)
    prov = json.loads((tmp_path / "rec" / "provenance.json").read_text())
    assert prov["status"] == "failed" and prov["failure"].startswith("DiskFull: ")
    assert not (tmp_path / "rec" / disk_full.MARKER).exists()


def test_enospc_anywhere_in_the_chain_is_a_full_disk(tmp_path):
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "metrics.jsonl"))
        except OSError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        full = disk_full.find(exc)
    assert full is not None and str(full).startswith(f"{tmp_path / 'metrics.jsonl'}: no space left on the device")
    assert disk_full.find(RuntimeError("something else")) is None
