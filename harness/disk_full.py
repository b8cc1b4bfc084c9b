"""A full disk, or a folder that refuses writes, is one line, exit code 2, and a record that says so.

:func:`guard` wraps a large write (a checkpoint, the model export) whose size is known in advance:
when it fails on a device without room for it, it raises :class:`DiskFull` naming the path, the
bytes it needs and the bytes free, in place of the writer's own chain of errors (torch's writer,
for one, reports a full disk as ``basic_ios::clear: iostream error``). :func:`find` recognises a
full disk anywhere in an exception's chain (``ENOSPC`` / ``EDQUOT``). :func:`record_failure`
marks the record ``failed`` (where the usual write to a temporary file finds no room, by
rewriting ``provenance.json`` in the blocks it already holds); where even that cannot be written it leaves an empty marker file
(:data:`MARKER`, which needs no free block), and :func:`note_previous` makes the next run of the
command say that the last one stopped on a full disk without recording it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
#: a folder that refuses writes (remounted read-only, a read-only export, permissions taken away):
#: treated like a full disk, one line naming the path
UNWRITABLE_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)
MARKER = ".stopped-disk-full"


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the file system holding ``path`` (its nearest existing parent); None if unknown."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def human(n: int | None) -> str:
    if n is None:
        return "an unknown amount"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


class DiskFull(OSError):
    """No room on the device for a write: the message names the path, the bytes needed and free."""

    def __init__(self, path: str | Path, needed: int | None = None, what: str = "writing"):
        self.path, self.needed, self.free = Path(path), needed, free_bytes(path)
        if needed is not None:
            short = max(needed - (self.free or 0), 0)
            amount = (f"{what} needs about {human(needed)} and {human(self.free)} is free; free at least "
                      f"{human(short)} more")
        else:
            amount = f"{what}: {human(self.free)} free; free some space"
        super().__init__(errno.ENOSPC, f"{self.path}: no space left on the device ({amount}, or choose another "
                                       f"--output.dir), then rerun the same command: it resumes from the last "
                                       f"checkpoint")

    def __str__(self) -> str:
        return str(self.strerror)


class NotWritable(DiskFull):
    """A write refused by the file system (read-only, no permission): the message names the path."""

    def __init__(self, path: str | Path, reason: str):
        OSError.__init__(self, errno.EROFS, f"{path}: cannot write there ({reason}); make the folder writable "
                                            f"again (or choose another --output.dir), then rerun the same command: "
                                            f"it resumes from the last checkpoint")
        self.path, self.needed, self.free = Path(path), None, None


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def find(exc: BaseException, path: str | Path = ".") -> DiskFull | None:
    """The :class:`DiskFull` behind ``exc`` (an ``ENOSPC`` / ``EDQUOT`` anywhere in its chain, named
    by the failing file or else ``path``), or a :class:`NotWritable` (``EROFS``, ``EACCES``,
    ``EPERM`` on a file under ``path``), or None when ``exc`` is neither."""
    for link in _chain(exc):
        if isinstance(link, DiskFull):
            return link
        if isinstance(link, OSError) and link.errno in FULL_ERRNOS:
            return DiskFull(link.filename or path)
        if isinstance(link, OSError) and link.errno in UNWRITABLE_ERRNOS and _inside(link.filename, path):
            return NotWritable(link.filename, link.strerror or os.strerror(link.errno))
    return None


def _inside(filename: Any, folder: str | Path) -> bool:
    """Whether ``filename`` (an OSError's) is ``folder`` or below it: a write refused elsewhere (a
    model cache, a library's own file) is that library's error, not the results folder's."""
    if not isinstance(filename, (str, os.PathLike)):
        return False
    try:
        Path(os.path.abspath(filename)).relative_to(os.path.abspath(folder))
        return True
    except ValueError:
        return False


@contextlib.contextmanager
def guard(path: str | Path, needed: int, what: str) -> Iterator[None]:
    """Run a write of about ``needed`` bytes to ``path``; a failure (an ``Exception``, not a
    Ctrl-C) on a device with less room than that, or with ``ENOSPC`` in its chain, is re-raised as
    :class:`DiskFull`. Call it after the write has removed its own partial output."""
    try:
        yield
    except Exception as exc:
        full = find(exc, path)
        if isinstance(full, NotWritable):
            raise full from exc
        free = free_bytes(path)
        if full is None and (free is None or free >= needed):
            raise
        raise DiskFull(path, needed, what) from exc


def tensor_bytes(obj: Any) -> int:
    """Bytes of every tensor in a nested dict / list / tuple (what ``torch.save`` writes, roughly)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def record_failure(rec: Any, reason: str) -> bool:
    """Mark ``rec`` failed with ``reason``; False (and the empty :data:`MARKER` left in the record,
    where one can be created) when the full disk refuses that write too."""
    try:
        rec.fail(reason)
        return True
    except OSError:
        pass
    marker = Path(rec.path) / MARKER
    with contextlib.suppress(OSError):
        marker.touch()
    try:
        done = _fail_in_place(rec, reason)
    except OSError:
        done = False
    if done:
        with contextlib.suppress(OSError):
            marker.unlink()
    return done


def _fail_in_place(rec: Any, reason: str) -> bool:
    """``provenance.json`` rewritten in place as ``failed``, where the new text fits in the blocks
    the file already holds (so the write needs no free block); False where it does not fit."""
    from harness.records import STATUS_FAILED, now_iso

    path = Path(rec.path) / "provenance.json"
    prov = rec.provenance()
    prov.update(status=STATUS_FAILED, failed=now_iso(), failure=reason)
    data = (json.dumps(prov, indent=2, sort_keys=True, default=str) + "\n").encode()
    if len(data) > os.stat(path).st_blocks * 512:
        return False
    with open(path, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())
    return True


def note_previous(rec: Any) -> str | None:
    """The note for a record whose last run stopped on a full disk without recording it (and the
    marker removed), or None."""
    marker = Path(rec.path) / MARKER
    if not marker.exists():
        return None
    marker.unlink(missing_ok=True)
    status = rec.provenance().get("status")
    return (f"{rec.path}: the last run of this record stopped on a full disk and could not record it "
            f"(provenance.json still says {status!r}); resuming from its last checkpoint")
