"""The data contract every task follows (``docs/adding-a-task.md``).

- **Where the data is: ``task.data_dir`` only.** ``None``: the task's built-in data (a demo set,
  or prompts it generates); a path: a file or folder in the task's layout; ``hub:OWNER/NAME[:SPLIT]``:
  a hub dataset (the split after the second ``:``, else ``task.split``). ``hf:`` and ``hf://`` are
  refused with the one accepted spelling, and so is a hub name in ``task.split``.
- **``limit`` belongs to the harness: a seeded sample in file order.** ``Task.load(split,
  data_dir)`` returns every example of the split (its *pool*); :func:`load_examples` then keeps
  ``limit`` of them, drawn by the ``data-sample`` stream of the run seed (:mod:`mrbench_core.seeds`)
  and kept in the order of the file (:func:`take`); the same seed keeps the same rows. Every caller
  that trains or evaluates on a task's examples loads them through :func:`load_examples`.
- **Two pools need more than a list.** A task that drops rows by a check too costly to run on
  every row (text-to-SQL runs each reference query) returns a :class:`Screened` pool: the sample
  walks the rows in the ``data-sample`` stream's order (:func:`seeded_order`), checks only the
  rows it visits until ``limit`` pass, and puts them back in file order. A task that generates its
  prompts returns a :class:`Generated` pool: the i-th prompt of a stream of
  :mod:`mrbench_core.seeds` (ifollow: ``train-prompts`` / ``heldout-prompts``), so no two purposes
  share draws; its ``limit`` is the number made, a prefix of that stream (a smaller limit keeps a
  prefix).
- **One hub reader.** :func:`read_hub` reads a ``hub:`` dataset through ``datasets``; every failure
  (no package, no network, no access) is one :class:`DataError` naming the dataset and the local
  alternative. A task maps the rows it returns.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from mrbench_core.errors import DataError
from mrbench_core.seeds import DATA_SAMPLE, stream_seed

HUB_PREFIX = "hub:"
RETIRED_HUB_PREFIXES = ("hf://", "hf:")

T = TypeVar("T")
R = TypeVar("R")
#: where a local copy goes instead of a hub dataset (the setting ``mrbench run`` reads)
LOCAL_ALTERNATIVE = "download its files and pass their file or folder as the data directory " \
                    "(mrbench run --task.data_dir PATH)"


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


def read_hub(hub: HubSource) -> list[dict[str, Any]]:
    """The rows of a hub dataset, read with ``datasets.load_dataset``; no package, no network, no
    access or an unknown name is one :class:`DataError` naming the dataset and the local way."""
    try:
        import datasets
    except ImportError as exc:
        raise DataError(f"reading a hub dataset needs the 'datasets' package (pip install 'mrbench[hub]'); "
                        f"or {LOCAL_ALTERNATIVE}", path=hub.spec) from exc
    try:
        rows = datasets.load_dataset(hub.repo, split=hub.split)
    except Exception as exc:  # network, auth, unknown name: all reported the same way
        raise DataError(f"could not load it from the hub ({type(exc).__name__}: {str(exc)[:300]}); without hub "
                        f"access, {LOCAL_ALTERNATIVE}", path=hub.spec) from exc
    return [dict(row) for row in rows]


# ---------------------------------------------------------------------------------------------
# pools and the harness's ``limit``

@dataclass(frozen=True)
class Generated(Generic[T]):
    """Examples a task makes rather than reads: ``make(i, seed)`` is the i-th of the stream that
    ``seed`` seeds; ``limit`` is how many are made (``default_size`` without one)."""

    make: Callable[[int, int], T]
    default_size: int


@dataclass(frozen=True)
class Screened(Generic[R, T]):
    """Rows in file order of which ``keep`` drops some, by a check too costly to run on every row:
    ``build`` makes the example of a kept row; ``finish`` hears the examples kept (a task's report)."""

    rows: Sequence[R]
    keep: Callable[[R], bool]
    build: Callable[[R], T]
    finish: Callable[[list[T]], None] | None = None


#: what ``Task.load`` returns: the split's examples in file order, or one of the two pools above
Pool = Sequence[T] | Generated[T] | Screened[Any, T]


class Loads(Protocol[T]):
    """What :func:`load_examples` needs of a task (:class:`tasks.base.Task` has it)."""

    def load(self, split: str = ..., data_dir: str | None = ...) -> Pool[T]: ...


def take(pool: Pool[T], limit: int | None, seed: int) -> list[T]:
    """``limit`` of ``pool`` (all when None), a seeded sample in file order (module docstring)."""
    if isinstance(pool, Generated):
        return [pool.make(i, seed) for i in range(pool.default_size if limit is None else limit)]
    if isinstance(pool, Screened):
        order = range(len(pool.rows)) if limit is None else seeded_order(len(pool.rows), seed)
        kept: list[int] = []
        for i in order:
            if limit is not None and len(kept) >= limit:
                break
            if pool.keep(pool.rows[i]):
                kept.append(i)
        examples = [pool.build(pool.rows[i]) for i in sorted(kept)]  # file order
        if pool.finish is not None:
            pool.finish(examples)
        return examples
    return seeded_sample(pool, limit, seed)


def load_examples(task: Loads[T], split: str = "train", data_dir: str | None = None, limit: int | None = None,
                  seed: int = 0) -> list[T]:
    """The examples a run trains or evaluates on: ``task.load(split, data_dir)``, then the run's
    seeded ``limit`` sample (:func:`take`), applied here and nowhere else. A hub name in ``split``
    is refused first, for every task (:func:`check_split`)."""
    check_split(split)
    return take(task.load(split, data_dir), limit, seed)
