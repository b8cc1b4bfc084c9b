"""What ran: a run config with its algorithm's parameters and its task's options resolved (every
default filled in).

``config.json`` stores what ran: after pre-flight the runner writes the algorithm's full
``config_dict()`` into ``algo.params`` and the task constructor's keyword arguments with their
defaults into ``task.options``, so ``--algo.beta 0.5`` on mrtpo and no flag at all are one
configuration, as are ``--task.options.min_constraints 5`` on ifollow and no flag. Records written
before that stored both as given (``{}`` for the defaults); :func:`resolved_config` brings either
form to the resolved one, so that a resume (``RunRecord.open``), a sweep and ``mrbench report``
compare effective values.

Settings that moved read at their new place (:func:`upgraded_config`, which every config dict
passes through, :func:`harness.config.from_dict` included): the replay's settings, once
``backend.local.replay_batch_size``, ``replay_chunk_size`` and ``share_prefix`` and again under
``backend.openrlhf``, are one section both backends read (``replay.batch_size``,
``replay.chunk_size``, ``replay.share_prefix``), so records and recipes of earlier releases still
resolve, resume and report.

Without a recipe, an MRTPO-family warm-up not given is sized to the run (:func:`size_warmup_to_run`).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import json
from functools import lru_cache
from typing import Any

_JSON_SCALARS = (bool, int, float, str, type(None))

#: the replay's settings that moved from each built-in backend's section to ``replay``: old field -> new
REPLAY_MOVED = {"replay_batch_size": "batch_size", "replay_chunk_size": "chunk_size", "share_prefix": "share_prefix"}
#: their defaults where they were (a backend left them there unless it ran them)
_OLD_REPLAY_DEFAULTS = {"replay_batch_size": 8, "replay_chunk_size": 128, "share_prefix": True}


def upgraded_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a config dict, maybe written by an earlier release) with every moved setting at its
    new place: the running backend's ``backend.<name>.replay_batch_size``, ``replay_chunk_size`` and
    ``share_prefix`` become ``replay.batch_size``, ``replay.chunk_size`` and ``replay.share_prefix``;
    the other built-in backend's copies, at their defaults (pre-flight refused any other value), go.
    A copy that disagrees stays where it is, and building the config then names its new place.
    ``config`` itself is not changed."""
    backend = config.get("backend") if isinstance(config, dict) else None
    sections = {s: backend[s] for s in ("local", "openrlhf")
                if isinstance(backend, dict) and isinstance(backend.get(s), dict)}
    if not any(old in opts for opts in sections.values() for old in REPLAY_MOVED):
        return config
    out = copy.deepcopy(config)
    replay = out.get("replay") if isinstance(out.get("replay"), dict) else {}
    for section in sections:
        opts = out["backend"][section]
        for old, new in REPLAY_MOVED.items():
            if old not in opts:
                continue
            value = opts[old]
            if section == out["backend"].get("name", "local"):
                if replay.get(new, value) == value:
                    replay[new] = opts.pop(old)
            elif value == _OLD_REPLAY_DEFAULTS[old]:
                del opts[old]
    out["replay"] = replay
    return out


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


@lru_cache(maxsize=256)
def _resolved(name: str, params_json: str) -> str | None:
    from algorithms.catalog import get_algorithm, upgraded_params

    params = json.loads(params_json)
    try:
        return _key(get_algorithm(name, **upgraded_params(name, params)).config_dict())
    except (LookupError, ValueError, TypeError, ImportError, RuntimeError):
        return None  # an algorithm this installation cannot build (a plugin that is gone): as given


def resolved_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Algorithm ``name``'s full parameters for ``params`` as given (old spellings read at their
    new place); ``params`` unchanged when the algorithm cannot be built here."""
    out = _resolved(name, _key(params))
    return dict(params) if out is None else json.loads(out)


def _json_default(value: Any) -> Any:
    """A constructor default as ``config.json`` holds it (tuples as lists), or ``inspect.Parameter.empty``
    for a default JSON cannot hold (an object the task builds itself)."""
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, _JSON_SCALARS) for v in value):
        return list(value)
    return inspect.Parameter.empty


@lru_cache(maxsize=64)
def _task_defaults(name: str) -> str | None:
    from tasks.registry import TASKS

    try:
        factory = TASKS.get(name)
        params = inspect.signature(factory).parameters.values()
    except (LookupError, ValueError, TypeError, ImportError, RuntimeError):
        return None  # a task this installation cannot build: its options as given
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    defaults = {p.name: _json_default(p.default) for p in params if p.kind in kinds}
    return json.dumps({k: v for k, v in defaults.items() if v is not inspect.Parameter.empty}, sort_keys=True)


def task_option_defaults(name: str) -> dict[str, Any]:
    """The defaults of task ``name``'s constructor keyword arguments that ``task.options`` can hold
    ({} for a task this installation cannot build)."""
    out = _task_defaults(name)
    return {} if out is None else json.loads(out)


def resolved_task_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Task ``name``'s options with every default filled in (tuples as lists, as JSON reads them back)."""
    given = json.loads(json.dumps(options, default=str))
    return {**task_option_defaults(name), **given}


def non_default_task_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Only the options that differ from task ``name``'s defaults: one form for a record that stored
    them as given and one that stored them resolved."""
    defaults = task_option_defaults(name)
    given = json.loads(json.dumps(options, default=str))
    return {k: v for k, v in given.items() if k not in defaults or defaults[k] != v}


def resolved_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config dict (``RunConfig.to_dict()`` or a ``config.json``) with
    ``algo.params`` and ``task.options`` resolved."""
    out = copy.deepcopy(upgraded_config(config))
    algo = out.get("algo")
    if isinstance(algo, dict) and isinstance(algo.get("name"), str):
        algo["params"] = resolved_params(algo["name"], dict(algo.get("params") or {}))
    task = out.get("task")
    if isinstance(task, dict) and isinstance(task.get("name"), str):
        task["options"] = resolved_task_options(task["name"], dict(task.get("options") or {}))
    return out


def size_warmup_to_run(cfg: Any) -> None:
    """Without a recipe (the main job and its variants), an MRTPO-family algorithm whose warm-up is
    not given gets one sized to the run: half its steps, at most the paper's 10 (App. D). The main
    job's 4 steps then reach the full beta at step 3 and replay from step 2; the paper's 10-step
    warm-up would leave beta at 0.108 of 0.5 by its last step. Recipes keep the algorithm's own
    default; ``--algo.warmup_steps`` always wins. The value lands in ``algo.params`` (config.json)."""
    if "warmup_steps" in cfg.algo.params:
        return
    paper = mrtpo_family_warmup(cfg.algo.name)
    if paper is not None:
        cfg.algo.params["warmup_steps"] = min(paper, max(1, cfg.schedule.steps // 2))


def mrtpo_family_warmup(name: str) -> int | None:
    """The default ``warmup_steps`` of algorithm ``name`` when it is MRTPO or built on it, else None
    (also for a name that is not registered: pre-flight reports that; and where the algorithms
    cannot be imported, without torch, where no run trains: the torch-free tests resolve configs)."""
    from mrbench_core.registry import RegistryError, UnknownNameError

    try:
        from algorithms.catalog import resolve as resolve_algorithm
        from algorithms.mrtpo import MRTPO

        cls = resolve_algorithm(name)
    except (UnknownNameError, RegistryError, ImportError):
        return None
    if not (isinstance(cls, type) and issubclass(cls, MRTPO)):
        return None
    field = {f.name: f for f in dataclasses.fields(cls.config_class)}.get("warmup_steps")
    return field.default if field is not None and isinstance(field.default, int) else None
