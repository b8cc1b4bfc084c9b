"""Advantage estimators for multi-reward RL: pure torch, no model, no I/O.

``RolloutBatch``, ``Advantages``, ``get_algorithm`` and ``list_algorithms`` are loaded on first use (PEP 562), so
``import algorithms`` stays light and does not import torch.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Advantages", "Algorithm", "ReplayRequest", "RolloutBatch", "get_algorithm", "list_algorithms"]

_LAZY = {
    "Advantages": "algorithms.base",
    "RolloutBatch": "algorithms.base",
    "ReplayRequest": "algorithms.base",
    "Algorithm": "algorithms.base",
    "get_algorithm": "algorithms.catalog",
    "list_algorithms": "algorithms.catalog",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'algorithms' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
