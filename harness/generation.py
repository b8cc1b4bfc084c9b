"""Greedy generation for ``mrbench eval NAME --model M``: the local backend's rollout path.

The model is loaded as ``mrbench run`` would load it (embedded names, hub ids, local paths),
in the rollout dtype the hardware supports, and answers every case greedily.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config import resolve


def generate_greedy(model: str, messages_list: Sequence[list[dict[str, str]]], *, max_new_tokens: int,
                    device: str = "auto", dtype: str = "auto") -> list[str]:
    from harness.backends.local import LocalBackend

    cfg = resolve(None, [("model", model), ("model.device", device), ("model.dtype", dtype)])
    backend = LocalBackend(cfg)
    return backend.generate(list(messages_list), max_new_tokens=max_new_tokens)
