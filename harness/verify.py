"""``mrbench verify RECORD [--steps N]``: rerun the first N steps of a record on this machine and say
in one line whether they reproduce it.

What runs: the record's ``config.json``, its seed included, on the local backend, in a temporary
directory (the record itself is only read). Only execution fields change: ``output.dir``, no
model export, no loggers, no checkpoint (the loop stops after step N:
:attr:`harness.training.run_loop.RunLoop.stop_after`), and, where the run chose its CPU threads by
the host's load (``backend.local.threads 0``), the count it ran with (its provenance's
``rollout.threads``: a reduction split over another number of threads may round otherwise). It
takes about as long as the N steps took, plus loading the model and the data.

What is compared: every key the record's rows hold in ``metrics.jsonl``, ``samples.jsonl`` and
``credit.jsonl`` (those the record has), steps 1 to N, nested values leaf by leaf, except the
wall-clock seconds of :data:`IGNORED_KEYS`. Keys only the rerun writes (a newer diagnostic) are
not compared.

The answer (stdout, one line) and the exit status:

- ``reproduces bit for bit`` (0): every compared value is equal;
- ``reproduces within tolerance`` (0): some floats differ, each within :data:`REL_TOL`, and the record's
  numerics fingerprint is this machine's while its device class is another (the same arithmetic on
  other hardware; texts, counts and ids must still be equal);
- ``does not reproduce`` (1): the first step, file and key that differ with both values, how many
  values differ, and what differs between the record's numerics identity and this machine's
  (:func:`harness.numerics.what_differs`).

Refused (exit 2, one line): a record without its files or with fewer than N steps, another backend
than ``local``, or training data that does not hash as the record's did (``data_hash``), naming
the data (a missing ``task.data_dir`` by its path).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.numerics import from_provenance, record_numerics, same_numerics, what_differs
from harness.records import RecordError, RunRecord, read_json, read_jsonl

#: wall-clock seconds: the only keys of a metrics row that differ between two runs of one seed
IGNORED_KEYS = frozenset({"time_generate", "time_score", "time_replay", "time_credit", "time_update", "time_step"})
#: the record's files compared, in the order their differences are named
FILES = ("metrics.jsonl", "samples.jsonl", "credit.jsonl")
#: the tolerance of "reproduces within tolerance": floats within this relative difference (or
#: ABS_TOL absolute, for values near 0)
REL_TOL = 1e-5
ABS_TOL = 1e-8
DEFAULT_STEPS = 2
_MISSING = "(missing)"


class VerifyRefused(ValueError):
    """The record cannot be rerun here; the message says why in one line."""


@dataclass
class Difference:
    step: int
    file: str
    key: str
    recorded: Any
    rerun: Any

    @property
    def within_tolerance(self) -> bool:
        a, b = self.recorded, self.rerun
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) \
                or not isinstance(b, (int, float)):
            return False
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


@dataclass
class Comparison:
    """What a rerun's rows differ in from the record's."""

    compared: int = 0  # leaf values compared
    differences: list[Difference] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the record's files that were compared

    @property
    def within_tolerance(self) -> bool:
        return all(d.within_tolerance for d in self.differences)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _leaves(recorded: Any, rerun: Any, key: str, step: int, file: str, out: Comparison) -> None:
    """Compare one stored value with the rerun's, leaf by leaf (dict keys the record holds)."""
    if isinstance(recorded, dict) and isinstance(rerun, dict):
        for k, v in recorded.items():
            _leaves(v, rerun.get(k, _MISSING), f"{key}.{k}", step, file, out)
        return
    if isinstance(recorded, list) and isinstance(rerun, list) and len(recorded) == len(rerun):
        for i, (a, b) in enumerate(zip(recorded, rerun)):
            _leaves(a, b, f"{key}[{i}]", step, file, out)
        return
    out.compared += 1
    if not _same(recorded, rerun):
        out.differences.append(Difference(step, file, key, recorded, rerun))


def _by_step(rows: list[dict[str, Any]], steps: int) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {n: [] for n in range(1, steps + 1)}
    for row in rows:
        if isinstance(row.get("step"), int) and 1 <= row["step"] <= steps:
            out[row["step"]].append(row)
    return out


def compare(record: Path, rerun: Path, steps: int) -> Comparison:
    """The rerun's rows of steps 1..``steps`` against the record's (see the module docstring)."""
    out = Comparison()
    tables = {}
    for name in FILES:
        if (record / name).exists():
            out.files.append(name)
            tables[name] = (_by_step(read_jsonl(record / name), steps), _by_step(read_jsonl(rerun / name), steps))
    for step in range(1, steps + 1):
        for name, (recorded, again) in tables.items():
            mine, theirs = recorded[step], again[step]
            if len(mine) != len(theirs):
                out.compared += 1
                out.differences.append(Difference(step, name, "rows", len(mine), len(theirs)))
                continue
            for i, (a, b) in enumerate(zip(mine, theirs)):
                for key, value in a.items():
                    if key not in IGNORED_KEYS:
                        where = key if name == "metrics.jsonl" else f"row {i} {key}"
                        _leaves(value, b.get(key, _MISSING), where, step, name, out)
    return out


# -- the rerun -----------------------------------------------------------------------------------
class _Rerun(RunRecord):
    """The rerun's temporary record, which refuses to start on data other than the record's."""

    recorded: dict[str, Any]
    data_where: str

    def start(self, *, seed: int, task_version: str, data_hash: str, extra: dict[str, Any] | None = None) -> None:
        want = self.recorded.get("data_hash")
        if want and data_hash != want:
            raise VerifyRefused(f"the training data here ({self.data_where}) hashes to {data_hash}, the record's to "
                                f"{want} (task version {task_version} here, {self.recorded.get('task_version')} in "
                                f"the record): its numbers cannot be checked on other data")
        super().start(seed=seed, task_version=task_version, data_hash=data_hash, extra=extra)


def _config(record: Path, out_dir: Path, steps: int, prov: dict[str, Any]) -> Any:
    from harness.config import ConfigError, from_dict

    try:
        cfg = from_dict(read_json(record / "config.json"))
    except (ConfigError, TypeError, ValueError) as exc:
        raise VerifyRefused(f"{record / 'config.json'} no longer builds a run config: {exc}") from exc
    if cfg.backend.name != "local":
        raise VerifyRefused(f"{record}: a record of the {cfg.backend.name!r} backend; verify reruns local-backend "
                            f"records")
    if steps > cfg.schedule.steps:
        raise VerifyRefused(f"--steps {steps}: the record's run has {cfg.schedule.steps} steps")
    cfg.output.dir = str(out_dir)
    cfg.output.save_model = False
    cfg.output.loggers = []
    threads = (prov.get("rollout") or {}).get("threads")
    if not cfg.backend.local.threads and isinstance(threads, int) and threads > 0:
        cfg.backend.local.threads = threads  # auto picked by the load then: the count the record ran with
    return cfg


def rerun(record: Path, steps: int, out_dir: Path) -> dict[str, Any]:
    """Train the record's first ``steps`` steps into ``out_dir``; the rerun's provenance."""
    from algorithms import get_algorithm
    from harness.backends.local import LocalBackend
    from tasks.registry import make_task

    prov = read_json(record / "provenance.json")
    cfg = _config(record, out_dir, steps, prov)
    task = make_task(cfg.task.name, **cfg.task.options)
    problem = task.data_problem(cfg.task.split, cfg.task.data_dir)
    if problem:
        raise VerifyRefused(f"the record's training data is missing here: {problem}")
    backend = LocalBackend(cfg, task=task, algorithm=get_algorithm(cfg.algo.name, **cfg.algo.params))
    backend.stop_after = steps
    rec = _Rerun.open(cfg)
    rec.recorded = prov
    rec.data_where = f"task.data_dir {cfg.task.data_dir}" if cfg.task.data_dir else \
        f"task {cfg.task.name}'s own data, options {json.dumps(cfg.task.options, sort_keys=True)}"
    try:
        with contextlib.redirect_stdout(sys.stderr):  # the answer is stdout's only line
            backend.train(rec)
    finally:
        rec.unlock()
    return read_json(out_dir / "provenance.json")


def _seconds(rows: list[dict[str, Any]], steps: int) -> float | None:
    times = [r.get("time_step") for r in rows if isinstance(r.get("step"), int) and r["step"] <= steps]
    return sum(times) if times and all(isinstance(t, (int, float)) for t in times) else None


def _value(value: Any) -> str:
    text = repr(value) if isinstance(value, float) else json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def verdict(record: Path, steps: int, result: Comparison, mine: dict[str, Any] | None, here: dict[str, Any],
            times: tuple[float | None, float | None], task_versions: tuple[Any, Any]) -> tuple[int, str]:
    """(exit status, the one line) for a comparison (see the module docstring)."""
    what = f"steps 1-{steps} of {record}" if steps > 1 else f"step 1 of {record}"
    values = f"{result.compared} values of {', '.join(result.files)}"
    timing = ""
    if times[0] is not None and times[1] is not None:
        timing = f"; the steps took {times[1]:.1f} s here, {times[0]:.1f} s in the record"
    same = same_numerics(mine, here)
    fingerprint = f"numerics fingerprint {here.get('fingerprint')}" if same else ""
    if not result.differences:
        return 0, f"reproduces bit for bit: {what} ({values}{'; ' + fingerprint if fingerprint else ''}){timing}"
    other_device = bool(mine and mine.get("device_class") != here.get("device_class"))
    if same and other_device and result.within_tolerance:
        return 0, (f"reproduces within tolerance: {what}: {len(result.differences)} of {values} differ, each within "
                   f"{REL_TOL:g} relative (the same {fingerprint} on another device: {mine.get('device_class')} "
                   f"in the record, {here.get('device_class')} here){timing}")
    first = result.differences[0]
    differs = what_differs(mine, here)
    if task_versions[0] != task_versions[1]:
        differs = "; ".join(x for x in (differs, f"task version {task_versions[0]} vs {task_versions[1]}") if x)
    identity = (f"record vs here: {differs}" if differs else
                "the record and this machine share commit, device class, versions and fingerprint")
    return 1, (f"does not reproduce: {what}: first at step {first.step}, {first.file} {first.key!r}: "
               f"{_value(first.recorded)} in the record, {_value(first.rerun)} here ({len(result.differences)} of "
               f"{values} differ); {identity}{timing}")


def verify(record: Path, steps: int = DEFAULT_STEPS) -> tuple[int, str]:
    """Rerun and compare (see the module docstring): (exit status, the one line)."""
    record = Path(record)
    if steps < 1:
        raise VerifyRefused(f"--steps {steps}: at least 1")
    for name in ("config.json", "provenance.json", "metrics.jsonl"):
        if not (record / name).is_file():
            raise VerifyRefused(f"{record / name}: missing (not a run record?)")
    recorded = read_jsonl(record / "metrics.jsonl")
    if len([r for r in recorded if isinstance(r.get("step"), int) and r["step"] <= steps]) < steps:
        raise VerifyRefused(f"{record}: holds {len(recorded)} steps, fewer than --steps {steps}")
    prov = read_json(record / "provenance.json")
    stored = record_numerics(record)  # None: older than the fingerprint; its commit and versions still tell
    mine = stored if stored is not None else from_provenance(prov)
    with tempfile.TemporaryDirectory(prefix="mrbench-verify-") as tmp:
        out_dir = Path(tmp) / "rerun"
        here_prov = rerun(record, steps, out_dir)
        result = compare(record, out_dir, steps)
        times = (_seconds(recorded, steps), _seconds(read_jsonl(out_dir / "metrics.jsonl"), steps))
    return verdict(record, steps, result, mine, here_prov.get("numerics") or {}, times,
                   (prov.get("task_version"), here_prov.get("task_version")))


def cmd_verify(args: Any) -> int:
    try:
        code, line = verify(Path(args.record), args.steps)
    except (VerifyRefused, RecordError) as exc:
        print(f"mrbench verify: {exc}", file=sys.stderr)
        return 2
    print(line)
    return code
