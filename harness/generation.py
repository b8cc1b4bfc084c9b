"""Greedy generation for ``mrbench eval NAME --model M``, through the configured backend.

The run config is resolved as ``mrbench run`` resolves it (defaults, ``--config`` recipe,
overrides), with the model set to M, so the backend and its options (device, precision,
attention) are the ones a training run of that recipe would use.
"""

from __future__ import annotations

from collections.abc import Sequence

from evals.runner import Generate
from harness.config import resolve


def backend_generate(model: str, *, backend: str | None = None, config: str | None = None,
                     overrides: Sequence[tuple[str, str]] = ()) -> Generate:
    """A ``generate(messages_list, max_new_tokens)`` from the configured backend's ``generate``."""
    from harness.backends import BACKENDS

    pairs = [("model", model), *overrides] + ([("backend", backend)] if backend else [])
    cfg = resolve(config, pairs)
    instance = BACKENDS.get(cfg.backend.name)(cfg)
    return instance.generate
