"""What ran: a run config with its algorithm's parameters and its task's options resolved (every
default filled in).

``config.json`` stores what ran: after pre-flight the runner writes the algorithm's full
``config_dict()`` into ``algo.params`` and the task constructor's keyword arguments with their
defaults into ``task.options``, so ``--algo.beta 0.5`` on mrtpo and no flag at all are one
configuration, as are ``--task.options.min_constraints 5`` on ifollow and no flag. Records written
before that stored both as given (``{}`` for the defaults); :func:`resolved_config` brings either
form to the resolved one, so that a resume (``RunRecord.open``), a sweep and ``mrbench report``
compare effective values.
"""

from __future__ import annotations

import copy
import inspect
import json
from functools import lru_cache
from typing import Any

_JSON_SCALARS = (bool, int, float, str, type(None))


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
    out = copy.deepcopy(config)
    algo = out.get("algo")
    if isinstance(algo, dict) and isinstance(algo.get("name"), str):
        algo["params"] = resolved_params(algo["name"], dict(algo.get("params") or {}))
    task = out.get("task")
    if isinstance(task, dict) and isinstance(task.get("name"), str):
        task["options"] = resolved_task_options(task["name"], dict(task.get("options") or {}))
    return out
