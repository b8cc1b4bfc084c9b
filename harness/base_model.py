"""The untrained model, evaluated as a run's end-of-run evaluation would evaluate it: a *base record*.

``mrbench run ... --base-model`` (and a sweep whose grid says ``base: true``) builds the run's
backend, skips training, and scores the configured model through :func:`harness.runner.end_of_run_eval`,
the very path a finished run's ``eval.json`` comes from: same benchmarks, same held-out cases
(``schedule.eval_limit``), same greedy decoding and token budget, same precision and attention.

What the evaluation depends on, its *identity*, is a few config fields (:data:`IDENTITY_FIELDS` plus
the generation options of the chosen backend): the task and its data, the model and its rollout
precision and device, the benchmarks and their limits. It is the whole of a base record's
``config.json`` (with ``record: base`` and ``algo.name: base``, so that tools grouping records by
task, algorithm and model see a row of its own). Layout::

    ROOT/<task>/base/<model-slug>/eval-<12 hex digits of the identity's hash>/
        config.json       the identity
        provenance.json   status, git commit, versions, host, times (record: base)
        eval.json         as a run's: {"benchmarks": ..., "eval_limit": N}

A finished base record is never recomputed: rerunning prints it. ``mrbench report`` puts it in the
row ``base`` of its task and model, and compares every run whose identity matches it with it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from harness import numerics
from harness.config import RunConfig, model_slug
from harness.records import (
    STATUS_FINISHED,
    STATUS_RUNNING,
    RecordError,
    RunRecord,
    git_commit,
    library_versions,
    now_iso,
    read_json,
)
from harness.resolved import non_default_task_options, resolved_config, resolved_task_options

BASE = "base"
#: the config fields an end-of-run evaluation depends on, whatever the backend
IDENTITY_FIELDS = ("task.name", "task.data_dir", "task.options", "model.name", "model.dtype", "model.device",
                   "backend.name", "schedule.eval_benchmarks", "schedule.eval_data_dir", "schedule.eval_limit",
                   "schedule.eval_max_new_tokens")
#: the generation options of the built-in backends (a plugin backend: all of backend.options.<name>);
#: openrlhf evaluates through the local backend's generator
BACKEND_FIELDS = {"local": ("backend.local.rollout_attention",), "openrlhf": ("backend.local.rollout_attention",)}
_MISSING = object()


def _get(config: dict[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def identity_fields(config: dict[str, Any]) -> tuple[str, ...]:
    backend = _get(config, "backend.name")
    extra = BACKEND_FIELDS.get(backend, (f"backend.options.{backend}",)) if isinstance(backend, str) else ()
    return IDENTITY_FIELDS + extra


def base_identity(config: dict[str, Any]) -> dict[str, Any]:
    """The ``config.json`` of the base record that matches a run's config (``RunConfig.to_dict()`` or
    a record's ``config.json``)."""
    out: dict[str, Any] = {"record": BASE, "algo": {"name": BASE, "params": {}}}
    for dotted in identity_fields(config):
        value = _get(config, dotted)
        if value is _MISSING:
            continue
        node = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = copy.deepcopy(value)
    task = out.get("task", {})
    if isinstance(task.get("options"), dict) and isinstance(task.get("name"), str):  # what the evaluation ran
        task["options"] = resolved_task_options(task["name"], task["options"])
    return out


def is_base(config: dict[str, Any]) -> bool:
    return isinstance(config, dict) and config.get("record") == BASE


def matches(base_config: dict[str, Any], run_config: dict[str, Any]) -> bool:
    """Whether a base record evaluates what a run's end-of-run evaluation evaluates. A field one of the
    two configs lacks (a record written before the field existed) does not count against it."""
    base_config, run_config = resolved_config(base_config), resolved_config(run_config)  # defaults filled in
    for dotted in identity_fields(run_config):
        a, b = _get(base_config, dotted), _get(run_config, dotted)
        if dotted in ("task.name", "model.name") and (a is _MISSING or b is _MISSING):
            return False
        if a is not _MISSING and b is not _MISSING and a != b:
            return False
    return True


def digest(identity: dict[str, Any]) -> str:
    """The base record's name: a hash of its identity with only the task options that differ from the
    defaults, so that a run config with the options as given and one with them resolved name one
    record (and records named before options were stored resolved keep their names)."""
    ident = copy.deepcopy(identity)
    task = ident.get("task", {})
    if isinstance(task.get("options"), dict) and isinstance(task.get("name"), str):
        task["options"] = non_default_task_options(task["name"], task["options"])
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]


def base_record_dir(root: str | Path, config: dict[str, Any]) -> Path:
    ident = base_identity(config)
    return (Path(root) / ident["task"]["name"] / BASE / model_slug(ident["model"]["name"])
            / f"eval-{digest(ident)}")


def evaluate_base(cfg: RunConfig) -> int:
    """Write (or, when finished, print) the base record of ``cfg``: ``output.dir`` when set, else
    :func:`base_record_dir` under ``output.root``. Returns the exit code, as :func:`harness.runner.run`."""
    from harness.preflight import PreflightError, preflight
    from harness.runner import end_of_run_eval, print_summary

    try:
        plan = preflight(cfg)
    except PreflightError as exc:
        print(f"mrbench run: {exc}", file=sys.stderr)
        return 2
    ident = base_identity(cfg.to_dict())
    rec = RunRecord(Path(cfg.output.dir) if cfg.output.dir else base_record_dir(cfg.output.root, cfg.to_dict()))
    rec.path.mkdir(parents=True, exist_ok=True)
    try:
        rec.lock()
    except RecordError as exc:
        print(f"mrbench run: {exc}", file=sys.stderr)
        return 2
    try:
        config_path = rec.path / "config.json"
        if config_path.exists() and read_json(config_path) != ident:
            print(f"mrbench run: {rec.path}: holds another record than this base-model evaluation; choose another "
                  f"--output.dir or remove the directory", file=sys.stderr)
            return 2
        if rec.finished:
            print(f"{rec.path}: this base-model evaluation already finished; not rerunning")
            print_summary(rec, rec.provenance().get("summary", {}), read_json(rec.path / "eval.json")["benchmarks"])
            return 0
        from mrbench_core.jsonio import atomic_write_json

        atomic_write_json(config_path, ident)
        git, versions = git_commit(), library_versions()
        rec.update_provenance(record=BASE, started=now_iso(), status=STATUS_RUNNING, git=git, versions=versions,
                              host=platform.node(), seed=None)
        t0 = time.time()
        try:
            backend = plan.backend_class(cfg, plan.task, plan.algorithm)
            evaluation = end_of_run_eval(plan, backend.generate, cfg)
        except BaseException as exc:
            rec.fail(f"{type(exc).__name__}: {exc}")
            raise
        rec.write_eval(evaluation)
        summary = {"wall_seconds": round(time.time() - t0, 1)}
        info = backend.rollout_info() if hasattr(backend, "rollout_info") else {}  # precision, attention, threads
        measured = backend.numerics_info() if hasattr(backend, "numerics_info") else None
        rec.update_provenance(status=STATUS_FINISHED, finished=now_iso(), summary=summary, rollout=info,
                              numerics=numerics.completed(measured, git, versions))
        print_summary(rec, summary, evaluation["benchmarks"])
        return 0
    finally:
        rec.unlock()
