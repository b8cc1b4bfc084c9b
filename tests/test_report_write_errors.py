"""``mrbench report`` into a folder that refuses its files (reliability probe 5, D2 and D3: read-only,
full) is one line naming the file, exit code 2; records left out are named on the console, not only
in leaderboard.md, and a record whose provenance.json is gone is one of them (RP1). The refusals
are simulated at the write layer (a read-only mount or a full device needs root): the figure
writer and the text writer fail as they do there.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from harness import cli
from harness.report import command

FINISHED = Path(__file__).parent / "fixtures" / "old_records" / "old-finished"


@pytest.fixture
def root(tmp_path):
    shutil.copytree(FINISHED, tmp_path / "root" / "old-finished")
    return tmp_path / "root"


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(("code", "hint"), [(errno.EROFS, "make it writable"), (errno.ENOSPC, "free some space")])
def test_a_figure_the_folder_refuses_is_one_line(root, tmp_path, capsys, monkeypatch, code, hint):
    def refuse(rep, out):
        raise OSError(code, os.strerror(code), str(Path(out) / "curves-toolcall.png"))

    monkeypatch.setattr(command, "draw_curves", refuse)
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "rep"), "--baseline", "mrtpo"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"mrbench report: {tmp_path / 'rep' / 'curves-toolcall.png'}: cannot write the report")
    assert os.strerror(code) in line and hint in line and "choose another --out" in line


def test_a_text_file_the_folder_refuses_is_one_line(root, tmp_path, capsys, monkeypatch):
    def refuse(path, text):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(command, "atomic_write_text", refuse)
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "rep"), "--baseline", "mrtpo"]) == 2
    assert "leaderboard.md: cannot write the report there" in _one_line(capsys.readouterr().err)


def test_records_left_out_are_named_on_the_console(root, tmp_path, capsys):
    damaged, bare = root / "damaged", root / "no-provenance"
    shutil.copytree(root / "old-finished", damaged)
    (damaged / "provenance.json").write_text('{"status": "fin')
    shutil.copytree(root / "old-finished", bare)
    (bare / "provenance.json").unlink()
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "rep"), "--baseline", "mrtpo"]) == 0
    err = capsys.readouterr().err
    note = [line for line in err.splitlines() if "records or values left out" in line]
    assert len(note) == 1 and "leaderboard.md lists each under 'Records and values left out'" in note[0], err
    board = (tmp_path / "rep" / "leaderboard.md").read_text().replace("\\_", "_")  # Markdown escapes
    assert f"{damaged}: " in board and f"{bare / 'provenance.json'}: missing" in board
