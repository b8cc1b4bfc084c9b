"""What ran: a run config with its algorithm's parameters resolved (every default filled in).

``config.json`` stores what ran: after pre-flight the runner writes the algorithm's full
``config_dict()`` into ``algo.params``, so ``--algo.beta 0.5`` on mrtpo and no flag at all are
one configuration. Records written before that stored the parameters as given (``params: {}``
for the defaults); :func:`resolved_config` brings either form to the resolved one, so that a
resume (``RunRecord.open``), a sweep and ``mrbench report`` compare effective values.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any


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


def resolved_config(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config dict (``RunConfig.to_dict()`` or a ``config.json``) with
    ``algo.params`` resolved."""
    out = copy.deepcopy(config)
    algo = out.get("algo")
    if isinstance(algo, dict) and isinstance(algo.get("name"), str):
        algo["params"] = resolved_params(algo["name"], dict(algo.get("params") or {}))
    return out
