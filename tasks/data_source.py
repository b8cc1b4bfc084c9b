"""The data contract every task follows (``docs/adding-a-task.md``).

- **Where the data is: ``task.data_dir`` only.** ``None``: the task's built-in data (a demo set,
  or prompts it generates); a path: a file or folder in the task's layout; ``hub:OWNER/NAME[:SPLIT]``:
  a hub dataset (the split after the second ``:``, else ``task.split``). ``hf:`` and ``hf://`` are
  refused with the one accepted spelling, and so is a hub name in ``task.split``.
- **``limit``: a seeded sample in file order.** ``limit=N`` keeps N of the rows that the task
  would otherwise train on, drawn by the ``data-sample`` stream of the run seed
  (:mod:`mrbench_core.seeds`) and kept in the order of the file (:func:`seeded_sample`); the same
  seed keeps the same rows. A task that drops rows (text-to-SQL's filters) samples among the rows
  it keeps.
- **``seed`` for generated data: a named stream.** A task that generates its prompts draws them
  from a stream of :mod:`mrbench_core.seeds` (ifollow: ``train-prompts`` / ``heldout-prompts``),
  so no two purposes share draws; its ``limit`` is the number generated, which is a seeded sample
  of that stream in stream order (prefix-stable: a smaller limit keeps a prefix).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from mrbench_core.errors import DataError
from mrbench_core.seeds import DATA_SAMPLE, stream_seed

HUB_PREFIX = "hub:"
RETIRED_HUB_PREFIXES = ("hf://", "hf:")

T = TypeVar("T")


@dataclass(frozen=True)
class HubSource:
    """A hub dataset named in ``task.data_dir``: ``hub:OWNER/NAME[:SPLIT]``."""

    repo: str
    split: str

    @property
    def spec(self) -> str:
        return f"{HUB_PREFIX}{self.repo}:{self.split}"


def hub_source(data_dir: str | None, split: str) -> HubSource | None:
    """The hub dataset ``data_dir`` names, else None (built-in data or a path); a retired prefix
    (``hf:``, ``hf://``) or a name without a dataset is a :class:`DataError` naming the spelling."""
    if not data_dir:
        return None
    text = str(data_dir)
    for old in RETIRED_HUB_PREFIXES:
        if text.startswith(old):
            raise DataError(f"task.data_dir {text!r}: hub datasets are written {HUB_PREFIX}OWNER/NAME[:SPLIT], "
                            f"e.g. {HUB_PREFIX}{text[len(old):]}")
    if not text.startswith(HUB_PREFIX):
        return None
    repo, _, hub_split = text[len(HUB_PREFIX):].partition(":")
    if not repo:
        raise DataError(f"task.data_dir {text!r} names no dataset; expected {HUB_PREFIX}OWNER/NAME[:SPLIT]")
    return HubSource(repo, hub_split or split)


def check_split(split: str) -> None:
    """A hub name belongs in ``task.data_dir``, not in ``task.split``."""
    for prefix in (HUB_PREFIX, *RETIRED_HUB_PREFIXES):
        if split.startswith(prefix):
            raise DataError(f"task.split {split!r}: a hub dataset goes in task.data_dir as "
                            f"{HUB_PREFIX}OWNER/NAME[:SPLIT]; task.split names a split")


def sample_indices(n: int, limit: int | None, seed: int) -> list[int]:
    """Indices of ``limit`` of ``n`` rows (all when ``limit`` is None or >= n), drawn by the
    ``data-sample`` stream of ``seed``, in increasing order."""
    if limit is None or limit >= n:
        return list(range(n))
    return sorted(random.Random(stream_seed(DATA_SAMPLE, seed)).sample(range(n), limit))


def seeded_sample(items: Sequence[T], limit: int | None, seed: int) -> list[T]:
    """``limit`` of ``items``, a seeded sample kept in file order (see the module docstring)."""
    return [items[i] for i in sample_indices(len(items), limit, seed)]


def seeded_order(n: int, seed: int) -> list[int]:
    """All ``n`` indices in the ``data-sample`` stream's order: a task that keeps only some rows
    walks them in this order until it has ``limit``, then puts the kept ones back in file order."""
    order = list(range(n))
    random.Random(stream_seed(DATA_SAMPLE, seed)).shuffle(order)
    return order
