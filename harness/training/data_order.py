"""The order in which a run sees its training examples, shared by every backend so that the same
cell draws the same prompts at the same step whichever backend trains it.

Position ``i`` (the i-th prompt drawn since the start of the run) falls in epoch ``i // n`` of the
``n`` examples; each epoch is a permutation drawn from the ``data-order`` stream of
:mod:`mrbench_core.seeds` for (seed, epoch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mrbench_core.seeds import DATA_ORDER, stream_seed


def examples_at(examples: Sequence[Any], seed: int, position: int, count: int) -> list[Any]:
    """The ``count`` examples drawn from ``position`` on."""
    n = len(examples)
    out = []
    for i in range(position, position + count):
        perm = np.random.RandomState(stream_seed(DATA_ORDER, seed, i // n, bits=32)).permutation(n)
        out.append(examples[int(perm[i % n])])
    return out
