"""Reference results, computed once per question and kept.

In memory, results are keyed by the database file's identity (absolute path, size, mtime) and the
normalised reference query. With ``disk_dir`` set, results are also stored as one JSON file per
key, named by ``sha256(sha256(database bytes) + NUL + query)``: valid across processes, runs and
copies of the same database, and invalidated by any change to the file's bytes. Only completed
outcomes are stored on disk (a result, or an SQLite error); a time or size limit is not, since it
depends on the machine. JSON keeps Python's value types: ints, floats (exact round trip), text,
NULL, and blobs (tagged, base64).

Thread-safe; cached reads never touch SQLite.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from tasks.text2sql.sandbox import QueryResult, Sandbox, SandboxLimits, file_checksum

REFERENCE_LIMITS = SandboxLimits(timeout_s=60.0, max_rows=2_000_000, max_bytes=1 << 30)
_DISK_KINDS = {"", "sqlite", "denied", "empty"}


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$blob": base64.b64encode(value).decode("ascii")}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and "$blob" in value:
        return base64.b64decode(value["$blob"])
    return value


class ReferenceCache:
    """Reference results by database and normalised query (see the module docstring)."""

    def __init__(self, sandbox: Sandbox, limits: SandboxLimits = REFERENCE_LIMITS,
                 disk_dir: str | os.PathLike[str] | None = None) -> None:
        self.sandbox = sandbox
        self.limits = limits
        self.disk_dir = Path(disk_dir) if disk_dir else None
        self._store: dict[tuple[Any, ...], QueryResult] = {}
        self._checksums: dict[tuple[Any, ...], str] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.disk_hits = 0
        self.misses = 0

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process (a scoring worker): the cached results, a lock of its own."""
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @staticmethod
    def _identity(db_path: str) -> tuple[Any, ...]:
        try:
            st = os.stat(db_path)
            return (os.path.abspath(db_path), st.st_size, st.st_mtime_ns)
        except OSError:
            return (os.path.abspath(db_path), None, None)

    def get(self, db_path: str, normalized_sql: str) -> QueryResult:
        ident = self._identity(db_path)
        key = ident + (normalized_sql,)
        with self._lock:
            hit = self._store.get(key)
        if hit is not None:
            self.hits += 1
            return hit
        disk_file = self._disk_file(db_path, ident, normalized_sql)
        result = self._read_disk(disk_file) if disk_file is not None else None
        if result is not None:
            self.disk_hits += 1
        else:
            self.misses += 1
            result = self.sandbox.run(db_path, normalized_sql, self.limits)
            if disk_file is not None and result.error_kind in _DISK_KINDS:
                self._write_disk(disk_file, result)
        with self._lock:
            self._store[key] = result
        return result

    def __len__(self) -> int:
        return len(self._store)

    # -- disk -------------------------------------------------------------------------------
    def _disk_file(self, db_path: str, ident: tuple[Any, ...], sql: str) -> Path | None:
        if self.disk_dir is None or ident[1] is None:
            return None
        with self._lock:
            checksum = self._checksums.get(ident)
        if checksum is None:
            checksum = file_checksum(db_path)
            with self._lock:
                self._checksums[ident] = checksum
        name = hashlib.sha256(f"{checksum}\0{sql}".encode()).hexdigest()
        return self.disk_dir / name[:2] / f"{name}.json"

    @staticmethod
    def _read_disk(path: Path) -> QueryResult | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return QueryResult(ok=bool(data["ok"]), rows=[tuple(_decode(v) for v in r) for r in data["rows"]],
                               columns=list(data["columns"]), error=str(data["error"]),
                               error_kind=str(data["error_kind"]), elapsed_s=float(data["elapsed_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent or unreadable: recompute

    @staticmethod
    def _write_disk(path: Path, result: QueryResult) -> None:
        data = {"ok": result.ok, "rows": [[_encode(v) for v in r] for r in result.rows], "columns": result.columns,
                "error": result.error, "error_kind": result.error_kind, "elapsed_s": result.elapsed_s}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # the disk cache is an optimisation; a read-only cache folder is not an error
