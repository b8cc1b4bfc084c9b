"""JSON-lines reading and atomic file writes, for every layer.

:func:`iter_jsonl` is the one JSON-lines reader: blank lines are skipped, and a line that is not
JSON (or, with ``objects=True``, not a JSON object) raises :class:`DataError` naming the file and
its 1-based line number. Text is read as UTF-8 with an optional byte-order mark
(:func:`read_text`, :func:`iter_text_lines`); bytes that are not UTF-8 raise :class:`DataError`
naming the file, the line where known, and the byte offset. Writes go to a temporary file in the same directory and then replace the
target, so a reader sees either the old or the new content, never half of it. Written files get
the ordinary permissions of a new file under the process's umask (``0o666 & ~umask``, e.g. 0644),
not the owner-only mode of a temporary file, so that records can be shared.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mrbench_core.errors import DataError

#: what every reader of text does with a file: UTF-8, a leading byte-order mark dropped
TEXT_ENCODING = "utf-8-sig"


def _not_utf8(path: Path, exc: UnicodeDecodeError, lineno: int | None = None, offset: int = 0) -> DataError:
    return DataError(f"not UTF-8 text ({exc.reason} at byte {offset + exc.start}); save the file as UTF-8",
                     path=str(path), row=lineno)


def read_text(path: str | Path) -> str:
    """The whole file as text (UTF-8, with or without a byte-order mark)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode(TEXT_ENCODING)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _not_utf8(path, exc, line) from exc


def iter_text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line with its newline) for every line of ``path``, read as it goes
    (UTF-8, a leading byte-order mark dropped; ``\\n``, ``\\r\\n`` and ``\\r`` end lines, as in
    text mode)."""
    path = Path(path)
    offset, lineno = 0, 0
    with path.open("rb") as fh:
        for raw in fh:  # split on b"\\n" only; a lone "\\r" is split below
            try:
                line = raw.decode(TEXT_ENCODING if offset == 0 else "utf-8")
            except UnicodeDecodeError as exc:
                raise _not_utf8(path, exc, lineno + 1, offset) from exc
            offset += len(raw)
            parts = line.replace("\r\n", "\n").split("\r") if "\r" in line else [line]
            for part in parts[:-1]:
                lineno += 1
                yield lineno, part + "\n"
            if parts[-1]:
                lineno += 1
                yield lineno, parts[-1]


def iter_jsonl(path: str | Path, *, objects: bool = True) -> Iterator[tuple[int, Any]]:
    """(1-based line number, parsed value) for every non-blank line of ``path``."""
    path = Path(path)
    if not path.is_file():
        raise DataError("no such file", path=str(path))
    for lineno, line in iter_text_lines(path):
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


def finite_or_null(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None, so that it dumps as strict JSON
    (``NaN`` and ``Infinity`` are not JSON: strict parsers refuse them)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    return obj


def strict_json_line(obj: Any) -> str:
    """One JSON-lines row of ``obj`` in strict JSON (non-finite numbers as null)."""
    return json.dumps(finite_or_null(obj), ensure_ascii=False, default=str, allow_nan=False) + "\n"


def atomic_write_json(path: str | Path, obj: Any, *, strict: bool = False) -> None:
    """Write ``obj`` as JSON; ``strict``: non-finite numbers become null (strict JSON)."""
    if strict:
        obj = finite_or_null(obj)
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str, allow_nan=not strict) + "\n")
