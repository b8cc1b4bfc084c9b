"""A results folder that refuses writes mid-run (remounted read-only, a read-only export,
permissions taken away) is treated like a full disk (reliability probe 5, D1): one line naming the
file, exit code 2, the record ``failed`` where anything can still be written, no chained
tracebacks from marking it failed or letting go of its lock; a sweep over such a root says so in
one line and its log (``sweep.json``) no longer stops it. The read-only device is simulated at the
write layer (a bind mount needs root): once the first metrics row is written, creating or removing
a file under the record is refused with EROFS (as where write permission on the folder is gone,
an existing file can still be rewritten in place).
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import disk_full
from harness.config import resolve
from harness.runner import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cfg(rec: Path):
    return resolve(None, [("model.name", "tiny-random"), ("model.dtype", "float32"), ("schedule.steps", "3"),
                          ("sampling.prompts_per_step", "1"), ("sampling.group_size", "2"),
                          ("sampling.max_new_tokens", "4"), ("schedule.eval_limit", "1"), ("output.dir", str(rec))])


@pytest.fixture
def read_only_after_first_row(monkeypatch):
    """Once ``metrics.jsonl`` holds a row under a folder, creating or removing a file there is EROFS."""
    real_mkstemp, real_unlink = tempfile.mkstemp, os.unlink
    folders: list[Path] = []

    def refused(path) -> bool:
        return any(Path(path).is_relative_to(f) and (f / "metrics.jsonl").is_file()
                   and (f / "metrics.jsonl").stat().st_size > 0 for f in folders)

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and refused(Path(dir) / "x"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(dir) / "tmp"))
        return real_mkstemp(*args, dir=dir, **kwargs)

    def unlink(path, *args, **kwargs):
        if refused(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_unlink(path, *args, **kwargs)

    def open_(path, flags, *args, **kwargs):  # a new file is refused; an existing one opens
        if flags & os.O_CREAT and not os.path.exists(path) and refused(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    real_open = os.open
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "open", open_)
    return folders


def test_a_record_whose_folder_turns_read_only_is_one_line_exit_two_and_failed(tmp_path, capsys,
                                                                               read_only_after_first_row):
    rec = tmp_path / "rec"
    read_only_after_first_row.append(rec)
    assert run(_cfg(rec)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "During handling" not in err, err
    lines = [line[line.index("mrbench run:"):] for line in err.replace("\r", "\n").splitlines()
             if "mrbench run:" in line]  # after the progress bar's last refresh
    assert len(lines) == 1, err
    assert "cannot write there (Read-only file system)" in lines[0] and "make the folder writable" in lines[0]
    prov = json.loads((rec / "provenance.json").read_text())  # rewritten in place: no new file needed
    assert prov["status"] == "failed" and prov["failure"].startswith("NotWritable: ")
    assert [json.loads(x)["step"] for x in (rec / "metrics.jsonl").read_text().splitlines()] == [1]


def test_a_write_refused_elsewhere_is_not_the_results_folder_s():
    exc = OSError(errno.EACCES, "Permission denied", "/some/model/cache/file")
    assert disk_full.find(exc, "/results/rec") is None
    assert isinstance(disk_full.find(OSError(errno.EROFS, "x", "/results/rec/a.tmp"), "/results/rec"),
                      disk_full.NotWritable)


def test_the_sweep_log_of_a_read_only_root_warns_once_and_the_sweep_goes_on(tmp_path, capsys, monkeypatch):
    from harness.sweep import status

    def refuse(path, data):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(status, "atomic_write_json", refuse)
    log = status.SweepLog(tmp_path, "g", tmp_path / "g.yaml", "local", [])
    log.save()
    log.save()
    err = capsys.readouterr().err
    assert err.count("sweep.json: not written (Read-only file system)") == 1
