"""A SQLite sandbox that model output can never harm.

Every query runs on a connection that is, at once:

1. opened read-only through a URI (``mode=ro``; ``immutable=1`` as well, so no lock or journal
   file is ever created next to the database, which also works on read-only media);
2. in ``PRAGMA query_only`` mode (set before the authorizer is installed);
3. guarded by an authorizer that allows only reading actions (SELECT, READ, FUNCTION other
   than ``load_extension``, RECURSIVE, and the internal schema reads) and denies every write,
   CREATE/DROP/ALTER, ATTACH/DETACH, PRAGMA, transaction control, VACUUM and virtual tables;
4. with extension loading left disabled and run-time limits lowered: the length of a string or
   blob (``max_value_bytes``), the SQL text length, and the number of attached databases (0);
5. stopped by a progress handler when it runs past ``timeout_s`` (checked every
   ``progress_steps`` virtual-machine instructions, so the limit holds inside long sorts, cross
   joins and recursive CTEs as well as while fetching; not inside one long function call, which
   :class:`tasks.text2sql.worker.WorkerSandbox` stops by killing its worker process);
6. refused before it reaches SQLite unless its first keyword is SELECT, WITH or VALUES
   (statements such as REINDEX or EXPLAIN that pass the authorizer without reading anything);
7. fetched in batches with a cap on rows (``max_rows``) and on the approximate bytes held
   (``max_bytes``); going over a cap stops the query.

A query that exceeds a limit comes back as a :class:`QueryResult` with ``ok=False`` and
``error_kind`` naming the limit; a refused action has ``error_kind="denied"``; an SQLite error
has ``error_kind="sqlite"``. :meth:`Sandbox.run` never raises on the query text.

Only one statement runs: the caller passes the statement it wants run (see
:func:`tasks.text2sql.sqltext.first_statement`); Python's ``execute`` refuses a second one.
Connections are cached per thread (and per process: a forked child opens its own) and per
database file. ``immutable=1`` means SQLite assumes the file does not change while open: the
benchmark files never do; a database rewritten in place needs a new :class:`Sandbox`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from tasks.text2sql.sqltext import lex

_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one query. ``timeout_s`` counts from the start of execution to the last row."""

    timeout_s: float = 5.0
    max_rows: int = 100_000
    max_bytes: int = 64 * 1024 * 1024
    max_value_bytes: int = 8 * 1024 * 1024
    max_sql_chars: int = 100_000
    progress_steps: int = 2_000


@dataclass
class QueryResult:
    """Outcome of one query. ``rows`` is a list of tuples (Python values as SQLite returns them)."""

    ok: bool
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    error: str = ""
    error_kind: str = ""  # "", "sqlite", "denied", "timeout", "row_limit", "byte_limit", "no_database", "empty"
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        return {"ok": self.ok, "rows": len(self.rows), "columns": len(self.columns), "error": self.error,
                "error_kind": self.error_kind, "elapsed_s": round(self.elapsed_s, 6)}


class _Stop(Exception):
    pass


def file_checksum(path: str) -> str:
    """SHA-256 of a file's bytes (used by the security tests and the reference-result cache)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _authorizer(action: int, arg1: Any, arg2: Any, db_name: Any, trigger: Any) -> int:
    if action in _ALLOWED_ACTIONS:
        if action == sqlite3.SQLITE_FUNCTION and str(arg2 or "").lower() in _DENIED_FUNCTIONS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class _Guard:
    """Per-connection state read by the progress handler."""

    def __init__(self) -> None:
        self.deadline = float("inf")
        self.timed_out = False

    def __call__(self) -> int:
        if time.perf_counter() > self.deadline:
            self.timed_out = True
            return 1
        return 0


class Sandbox:
    """Runs read-only queries on SQLite files under :class:`SandboxLimits`."""

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._local = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process (a scoring worker, :mod:`mrbench_core.budget_worker`): the
        limits, without this process's connections."""
        state = dict(self.__dict__)
        del state["_local"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    # -- connections ----------------------------------------------------------------------
    def _connections(self) -> dict[str, tuple[sqlite3.Connection, _Guard]]:
        conns = getattr(self._local, "conns", None)
        if conns is None or getattr(self._local, "pid", None) != os.getpid():
            conns = {}  # a forked child never reuses its parent's connections
            self._local.conns = conns
            self._local.pid = os.getpid()
        return conns

    def _connect(self, db_path: str) -> tuple[sqlite3.Connection, _Guard]:
        key = os.path.abspath(db_path)
        conns = self._connections()
        if key in conns:
            return conns[key]
        if not os.path.isfile(key):
            raise FileNotFoundError(key)
        uri = "file:" + urllib.parse.quote(key) + "?mode=ro&immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=True)
        conn.text_factory = _decode_text
        conn.execute("PRAGMA query_only = ON")
        lim = self.limits
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, lim.max_value_bytes)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, max(1000, lim.max_sql_chars * 4))
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        guard = _Guard()
        conn.set_progress_handler(guard, lim.progress_steps)
        conn.set_authorizer(_authorizer)
        conns[key] = (conn, guard)
        return conn, guard

    def close(self) -> None:
        """Close this thread's connections."""
        for conn, _ in self._connections().values():
            conn.close()
        self._connections().clear()

    # -- queries --------------------------------------------------------------------------
    def run(self, db_path: str, sql: str, limits: SandboxLimits | None = None) -> QueryResult:
        """Run one statement; never raises on ``sql``. ``limits`` overrides the time/row/byte caps."""
        lim = limits or self.limits
        start = time.perf_counter()
        if not isinstance(sql, str) or not sql.strip():
            return QueryResult(False, error="empty query", error_kind="empty")
        if len(sql) > lim.max_sql_chars:
            return QueryResult(False, error=f"query longer than {lim.max_sql_chars} characters",
                               error_kind="byte_limit")
        first = _first_keyword(sql)
        if first not in _READ_STATEMENTS:
            return QueryResult(False, error=f"not authorized: only SELECT statements may run (this one starts "
                               f"with {first or 'no keyword'})", error_kind="denied")
        try:
            conn, guard = self._connect(db_path)
        except (OSError, sqlite3.Error) as exc:
            return QueryResult(False, error=f"cannot open database {db_path}: {exc}", error_kind="no_database")
        guard.timed_out = False
        guard.deadline = start + lim.timeout_s
        rows: list[tuple[Any, ...]] = []
        cursor = None
        try:
            cursor = conn.execute(sql)
            columns = [d[0] for d in (cursor.description or [])]
            held = 0
            while True:
                batch = cursor.fetchmany(256)
                if not batch:
                    break
                rows.extend(batch)
                if len(rows) > lim.max_rows:
                    raise _Stop("row_limit", f"query returned more than {lim.max_rows} rows")
                held += sum(_row_bytes(r) for r in batch)
                if held > lim.max_bytes:
                    raise _Stop("byte_limit", f"query returned more than {lim.max_bytes} bytes")
            return QueryResult(True, rows=rows, columns=columns, elapsed_s=time.perf_counter() - start)
        except _Stop as stop:
            kind, message = stop.args
            return QueryResult(False, error=message, error_kind=kind, elapsed_s=time.perf_counter() - start)
        except sqlite3.DatabaseError as exc:
            elapsed = time.perf_counter() - start
            message = str(exc)
            if guard.timed_out:
                return QueryResult(False, error=f"query stopped after the {lim.timeout_s:g} s time limit",
                                   error_kind="timeout", elapsed_s=elapsed)
            kind = "denied" if ("not authorized" in message or "authorization denied" in message) else "sqlite"
            return QueryResult(False, error=message, error_kind=kind, elapsed_s=elapsed)
        except (sqlite3.Error, ValueError, OverflowError, MemoryError, RecursionError) as exc:
            return QueryResult(False, error=f"{type(exc).__name__}: {exc}", error_kind="sqlite",
                               elapsed_s=time.perf_counter() - start)
        finally:
            guard.deadline = float("inf")
            if cursor is not None:
                try:
                    cursor.close()
                except sqlite3.Error:
                    pass


_READ_STATEMENTS = {"SELECT", "WITH", "VALUES"}


def _first_keyword(sql: str) -> str:
    toks = lex(sql)
    return toks[0].upper if toks else ""


def _decode_text(data: bytes) -> str:
    """Text columns: UTF-8, with undecodable bytes replaced (some Spider databases hold latin-1)."""
    return data.decode("utf-8", errors="replace")


def _row_bytes(row: tuple[Any, ...]) -> int:
    total = 16
    for v in row:
        if isinstance(v, (str, bytes)):
            total += len(v)
        else:
            total += 8
    return total
