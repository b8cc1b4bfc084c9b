"""Named random streams: each purpose draws from its own stream, derived from (purpose, run seed).

A stream is named by its key ``"<purpose>:<seed>[:<index>...]"``. :func:`stream_seed` turns a
key into an integer with BLAKE2b, which is stable across processes, machines and Python
versions (the built-in ``hash`` of a string is salted per process); :func:`stream_key` gives the
key itself, for generators seeded by a string (``random.Random(key)``). Keys of different purposes
differ in their prefix, so two purposes never share a stream, whatever the seeds: no run seed
trains on the held-out prompts, and no seed's sampling replays another seed's data order.

The built-in purposes:

- ``train-prompts``, ``dev-prompts``, ``heldout-prompts``: generated examples of a task's
  training, validation and held-out (evaluation) splits;
- ``data-order``: the epoch-wise permutation of the training examples (index: the epoch);
- ``data-sample``: which rows a task keeps under ``task.limit`` (a seeded sample, kept in file order);
- ``sampling``: the rollout sampler (index: the training step);
- ``shuffle``: random permutations inside an algorithm (index: the training step).

Plugins may name their own purposes; a purpose is a non-empty name without ``:``.
"""

from __future__ import annotations

import hashlib

TRAIN_PROMPTS = "train-prompts"
DEV_PROMPTS = "dev-prompts"
HELDOUT_PROMPTS = "heldout-prompts"
DATA_ORDER = "data-order"
DATA_SAMPLE = "data-sample"
SAMPLING = "sampling"
SHUFFLE = "shuffle"

BUILTIN_PURPOSES = (TRAIN_PROMPTS, DEV_PROMPTS, HELDOUT_PROMPTS, DATA_ORDER, DATA_SAMPLE, SAMPLING, SHUFFLE)


def stream_key(purpose: str, seed: int, *index: int) -> str:
    """``stream_key("sampling", 3, 7)`` -> ``"sampling:3:7"``; the name of one stream."""
    if not isinstance(purpose, str) or not purpose or ":" in purpose:
        raise ValueError(f"a stream purpose is a non-empty name without ':', got {purpose!r} "
                         f"(built-in purposes: {', '.join(BUILTIN_PURPOSES)})")
    for value in (seed, *index):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"stream {purpose!r}: seed and indices must be integers, got {value!r}")
    return ":".join([purpose, str(seed), *(str(i) for i in index)])


def stream_seed(purpose: str, seed: int, *index: int, bits: int = 63) -> int:
    """A ``bits``-bit non-negative integer seed for the stream ``stream_key(purpose, seed, *index)``.

    63 bits suit ``torch.manual_seed``; ``numpy.random.RandomState`` needs ``bits=32``.
    """
    if not 1 <= bits <= 64:
        raise ValueError(f"bits must be in [1, 64], got {bits}")
    digest = hashlib.blake2b(stream_key(purpose, seed, *index).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - bits)
