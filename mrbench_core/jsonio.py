"""JSON-lines reading and atomic file writes, for every layer.

:func:`iter_jsonl` is the one JSON-lines reader: blank lines are skipped, and a line that is not
JSON (or, with ``objects=True``, not a JSON object) raises :class:`DataError` naming the file and
its 1-based line number. Writes go to a temporary file in the same directory and then replace the
target, so a reader sees either the old or the new content, never half of it. Written files get
the ordinary permissions of a new file under the process's umask (``0o666 & ~umask``, e.g. 0644),
not the owner-only mode of a temporary file, so that records can be shared.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mrbench_core.errors import DataError


def iter_jsonl(path: str | Path, *, objects: bool = True) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed value) for every non-blank line of ``path``."""
    path = Path(path)
    if not path.is_file():
        raise DataError("no such file", path=str(path))
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"not valid JSON ({exc.msg})", path=str(path), row=lineno) from exc
            if objects and not isinstance(value, dict):
                raise DataError("each line must be a JSON object", path=str(path), row=lineno)
            yield lineno, value


def read_jsonl(path: str | Path, *, objects: bool = True) -> list[Any]:
    """Every row of a JSON-lines file (see :func:`iter_jsonl`)."""
    return [row for _, row in iter_jsonl(path, objects=objects)]


def current_umask() -> int:
    """The process's umask: from /proc where Linux shows it (no change to the process), else by
    setting it and setting it back."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), 0o666 & ~current_umask())  # mkstemp creates files owner-only (0600)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
