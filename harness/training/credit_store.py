"""``credit.jsonl``: credit rows (:mod:`harness.training.credit_rows`), appended once per training step.

The file only grows during a run: a step's rows go out in one append (never a rewrite of the
file), so logging costs the same at step 300 as at step 1. A run stopped mid-write may leave a
truncated last line; readers skip it and the next append cuts it off. A run resumed from a checkpoint at step N drops the rows
logged after step N once, before its first new step (they belong to steps it repeats).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mrbench_core.errors import DataError
from mrbench_core.jsonio import atomic_write_text

CREDIT_FILE = "credit.jsonl"


def credit_path(directory: str | Path) -> Path:
    return Path(directory) / CREDIT_FILE


def append_rows(directory: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Append ``rows`` to ``directory/credit.jsonl`` in one write; the number of rows written."""
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows]
    if not lines:
        return 0
    path = credit_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    _drop_partial_line(path)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(lines))
        fh.flush()
        os.fsync(fh.fileno())
    return len(lines)


def _drop_partial_line(path: Path) -> None:
    """Cut a last line left without its newline by an interrupted write."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        data = fh.read()
        fh.truncate(data.rfind(b"\n") + 1)


def read_rows(directory: str | Path, step: int | None = None) -> list[dict[str, Any]]:
    """The rows of ``directory/credit.jsonl`` (those of ``step`` only, when given). A line that is
    not JSON raises DataError naming the file and line, unless it is a truncated last line."""
    path = credit_path(directory)
    if not path.is_file():
        raise DataError(f"no {CREDIT_FILE} here: train with output.credit_groups > 0, or run "
                        f"mrbench localize, to write one", path=str(directory))
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines):
                break
            raise DataError(f"not valid JSON ({exc.msg})", path=str(path), row=lineno) from exc
        if step is None or row.get("step") == step:
            rows.append(row)
    return rows


def logged_steps(directory: str | Path) -> list[int]:
    return sorted({r["step"] for r in read_rows(directory) if r.get("step") is not None})


def drop_after(directory: str | Path, last_step: int) -> None:
    """Remove the rows of steps after ``last_step`` (a resume); the file is left alone when it
    holds none."""
    path = credit_path(directory)
    if not path.is_file():
        return
    rows = read_rows(directory)
    kept = [r for r in rows if r.get("step") is None or r["step"] <= last_step]
    if len(kept) == len(rows) and path.read_text(encoding="utf-8").endswith("\n"):
        return
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
                                    for r in kept))
