"""Records a team can share: files get the umask's ordinary permissions, a record whose writer let
go keeps no lock file, and execution-only settings (threads) may change on resume."""

from __future__ import annotations

import os
import stat

import pytest

from harness.config import resolve
from harness.records import RunRecord, config_fingerprint, lock_held
from mrbench_core.jsonio import atomic_write_text


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_atomic_writes_follow_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    atomic_write_text(tmp_path / "f.json", "x")
    assert stat.S_IMODE((tmp_path / "f.json").stat().st_mode) == mode


def test_record_files_are_group_readable_and_the_lock_goes_with_the_writer(tmp_path, umask):
    umask(0o022)
    cfg = resolve(None, [("output.dir", str(tmp_path / "rec"))])
    rec = RunRecord.open(cfg)
    assert lock_held(rec.path)
    rec.start(seed=0, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1})
    rec.finish({})
    rec.unlock()
    assert not (rec.path / ".lock").exists() and not lock_held(rec.path)
    for name in ("config.json", "provenance.json", "metrics.jsonl"):
        assert stat.S_IMODE((rec.path / name).stat().st_mode) == 0o644, name


def test_a_stale_lock_file_is_taken_over_and_removed(tmp_path):
    cfg = resolve(None, [("output.dir", str(tmp_path / "rec"))])
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / ".lock").write_text("12345\n")  # left by a killed writer: nobody holds it
    assert not lock_held(tmp_path / "rec")
    rec = RunRecord.open(cfg)
    assert lock_held(rec.path)
    rec.unlock()
    assert not (rec.path / ".lock").exists()


def test_a_writer_that_locked_a_removed_lock_file_does_not_share_the_record(tmp_path, monkeypatch):
    """Race: B opens .lock, A (finishing) removes it and lets go, C creates a new one and holds it,
    then B's flock succeeds on the removed file. B must notice and defer to C."""
    import fcntl

    from harness import records

    cfg = resolve(None, [("output.dir", str(tmp_path / "rec"))])
    (tmp_path / "rec").mkdir()
    lock_path = tmp_path / "rec" / ".lock"
    lock_path.write_text("")
    holder = []
    real_flock = fcntl.flock

    def racing_flock(fd, op):
        if not holder and op & fcntl.LOCK_EX:  # between B's open and B's flock: A leaves, C arrives
            lock_path.unlink()
            holder.append(open(lock_path, "a+"))  # noqa: SIM115  (closed at the end of the test)
            real_flock(holder[0].fileno(), fcntl.LOCK_EX)
        return real_flock(fd, op)

    monkeypatch.setattr(records.fcntl, "flock", racing_flock)
    with pytest.raises(records.RecordError, match="another run is writing"):
        RunRecord.open(cfg)
    holder[0].close()


def test_threads_may_change_on_resume_but_nothing_else(tmp_path):
    one = resolve(None, [("output.dir", str(tmp_path / "rec")), ("backend.local.threads", "1")])
    two = resolve(None, [("output.dir", str(tmp_path / "rec")), ("backend.local.threads", "2")])
    RunRecord.open(one).unlock()
    RunRecord.open(two).unlock()  # no "different configuration"
    assert config_fingerprint(one) == config_fingerprint(two)
    other = resolve(None, [("output.dir", str(tmp_path / "rec")), ("optim.lr", "0.5")])
    assert config_fingerprint(other) != config_fingerprint(one)
