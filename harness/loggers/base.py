"""The logger interface and the set of loggers one run writes to.

A :class:`Logger` receives, in order: ``start`` (once per process, with the id a resumed run
stored), ``metrics`` (every metrics row, one step each, after ``metrics.jsonl`` has it),
``samples`` (the step's sampled responses), ``benchmarks`` (the end-of-run evaluation) and
``close``. :class:`LoggerSet` fans the calls out, keeps each logger's run id and last logged step
in ``<record>/loggers.json`` (so a resumed run continues the same logger run and never logs a
step twice), logs the rows a logger has not seen yet when it starts (steps written before a crash
or before it was added) and turns a logger that fails mid-run off with one warning: training and
``metrics.jsonl`` never depend on a logger.
"""

from __future__ import annotations

import json
import math
import socket
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mrbench_core.jsonio import atomic_write_json

STATE_FILE = "loggers.json"
REACH_TIMEOUT_S = 3.0  # how long a logger's server may take to accept a connection at start


def check_reachable(url: str, what: str, timeout: float = REACH_TIMEOUT_S) -> None:
    """For an ``http(s)`` URL, a TCP connection to its server within ``timeout`` seconds, else
    :class:`ConnectionError` naming ``what`` and the URL (other schemes: nothing to reach). A logger
    calls it at start, so a server that is down costs seconds, once, not the library's retries."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"{what} {url} did not answer within {timeout:g} s ({type(exc).__name__}: {exc})") from None


@dataclass
class RunInfo:
    """What every logger names its run with: ``name``, ``group`` (a sweep's name, or None),
    ``tags`` (task, algorithm, model, seed, git commit), the resolved ``config`` (nested) and the
    record directory."""

    name: str
    record: Path
    config: dict[str, Any]
    tags: dict[str, str] = field(default_factory=dict)
    group: str | None = None


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics row, ``step`` left out (bools as 0/1; None and NaN skipped)."""
    out: dict[str, float] = {}
    for key, value in row.items():
        if key == "step" or value is None or isinstance(value, str):
            continue
        if isinstance(value, (bool, int, float)) and math.isfinite(float(value)):
            out[key] = float(value)
    return out


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config -> dotted keys with scalar values (lists and mappings as JSON text)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_config(value, path + "."))
        elif isinstance(value, (list, tuple, dict)):
            out[path] = json.dumps(value)
        else:
            out[path] = value
    return out


def benchmark_scalars(results: dict[str, Any]) -> dict[str, float]:
    """``eval/<benchmark>/<metric>`` for every number in the benchmarks' summaries."""
    out: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
            out[prefix] = float(value)

    for name, res in results.items():
        if isinstance(res, dict) and "summary" in res:
            walk(f"eval/{name}", res["summary"])
    return out


class Logger(ABC):
    """One tracking library. ``extra`` names the pip extra that installs it."""

    name: str = ""
    extra: str = ""

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        """Why this logger cannot start on this machine with ``cfg`` (None: it can); pre-flight."""
        return None

    @abstractmethod
    def start(self, info: RunInfo, run_id: str | None) -> str | None:
        """Open (or, with the stored ``run_id``, continue) the logger run; returns its id to store."""

    @abstractmethod
    def log_scalars(self, step: int, values: dict[str, float]) -> None:
        """Every value at ``step`` (1-based training step)."""

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """A few sampled responses of ``step`` with their rewards (default: not logged)."""

    def log_benchmarks(self, step: int, values: dict[str, float], results: dict[str, Any]) -> None:
        """The end-of-run benchmark results (default: as scalars at the last step)."""
        self.log_scalars(step, values)

    def close(self, summary: dict[str, Any] | None) -> None:
        """Flush and end the run (``summary`` is None when the run stops on an error)."""


class LoggerSet:
    """The loggers of one run, attached to its record as an observer (see the module docstring)."""

    def __init__(self, loggers: Iterable[Logger], info: RunInfo, out: Any = None):
        self.loggers = list(loggers)
        self.info = info
        self.out = out
        self.state_path = info.record / STATE_FILE
        self.state: dict[str, dict[str, Any]] = {}
        if self.state_path.exists():
            self.state = json.loads(self.state_path.read_text(encoding="utf-8"))
        self.last_step = 0
        self.logged: dict[str, set[int]] = {}  # steps each logger logged in this process

    def _save(self) -> None:
        atomic_write_json(self.state_path, self.state)

    def _failed(self, logger: Logger, what: str, exc: BaseException) -> None:
        self.loggers.remove(logger)
        print(f"mrbench: warning: logger {logger.name} failed ({what}: {type(exc).__name__}: {exc}); it is off "
              f"for the rest of this run; training goes on and metrics.jsonl is complete",
              file=self.out or sys.stderr, flush=True)

    def _each(self, what: str, call: Any) -> None:
        for logger in list(self.loggers):
            try:
                call(logger)
            except Exception as exc:  # a logger never stops training
                self._failed(logger, what, exc)

    def start(self, rows: list[dict[str, Any]]) -> None:
        """Start every logger and log the metrics rows it has not logged yet."""
        for logger in list(self.loggers):
            st = self.state.setdefault(logger.name, {"id": None, "last_step": 0})
            try:
                st["id"] = logger.start(self.info, st.get("id"))
            except Exception as exc:
                self._failed(logger, "start", exc)
                continue
            self._save()
        self.catch_up(rows)

    def catch_up(self, rows: list[dict[str, Any]]) -> None:
        """Log the rows a logger has not logged yet (a backend writing its rows from another process,
        such as the openrlhf backend's Ray trainer, reaches the loggers this way when training ends)."""
        for row in rows:
            self.metrics(row)

    def metrics(self, row: dict[str, Any]) -> None:
        step = int(row["step"])
        self.last_step = max(self.last_step, step)
        values = scalars(row)
        for logger in list(self.loggers):
            st = self.state[logger.name]
            if step <= int(st.get("last_step", 0)):
                continue  # logged before this process started (a resumed run)
            try:
                logger.log_scalars(step, values)
            except Exception as exc:
                self._failed(logger, f"step {step}", exc)
                continue
            st["last_step"] = step
            self.logged.setdefault(logger.name, set()).add(step)
        self._save()

    def samples(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        step = int(rows[0]["step"])
        for logger in list(self.loggers):
            if step not in self.logged.get(logger.name, ()):
                continue  # that step was logged by an earlier process
            try:
                logger.log_samples(step, rows)
            except Exception as exc:
                self._failed(logger, f"samples of step {step}", exc)

    def benchmarks(self, results: dict[str, Any]) -> None:
        values = benchmark_scalars(results)
        if values:
            self._each("benchmarks", lambda lg: lg.log_benchmarks(max(self.last_step, 1), values, results))

    def close(self, summary: dict[str, Any] | None) -> None:
        self._each("close", lambda lg: lg.close(summary))
        self.loggers = []
