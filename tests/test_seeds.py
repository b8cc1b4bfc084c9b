"""Named seed streams: stable across processes, distinct per purpose, and the held-out prompts
never among any seed's training prompts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mrbench_core.seeds import (
    BUILTIN_PURPOSES,
    DATA_ORDER,
    HELDOUT_PROMPTS,
    SAMPLING,
    SHUFFLE,
    TRAIN_PROMPTS,
    stream_key,
    stream_seed,
)
from tasks.data_source import load_examples
from tasks.ifollow.task import DEFAULT_SIZE, InstructionFollowingTask

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)

# seeds whose training prompts were the dev / held-out prompts when splits were seed offsets
FORMER_COLLISIONS = [1_000_003, 2_000_003, 3_000_006, -1_000_003, -2_000_003]


def test_stream_seed_is_blake2b_of_the_key_and_the_same_in_a_fresh_process():
    assert stream_key(SAMPLING, 0, 0) == "sampling:0:0"
    assert stream_seed(SAMPLING, 0, 0) == 6848768549583078797
    assert stream_seed(DATA_ORDER, 3, 1, bits=32) == 709977366
    code = "from mrbench_core.seeds import stream_seed; print(stream_seed('sampling', 0, 0))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) == stream_seed(SAMPLING, 0, 0)  # not the salted built-in hash()


def test_purposes_seeds_and_steps_give_distinct_streams():
    seeds = {stream_seed(p, s, n) for p in BUILTIN_PURPOSES for s in range(20) for n in range(20)}
    assert len(seeds) == len(BUILTIN_PURPOSES) * 20 * 20
    # the former stride: seed s at step 1_000_003 was seed s + 1 at step 0
    assert stream_seed(SAMPLING, 0, 1_000_003) != stream_seed(SAMPLING, 1, 0)
    assert stream_seed(SHUFFLE, 0, 1) != stream_seed(SAMPLING, 0, 1)


@pytest.mark.parametrize("bits", [1, 32, 63, 64])
def test_stream_seed_fits_its_bits(bits):
    assert all(0 <= stream_seed(TRAIN_PROMPTS, s, bits=bits) < 2 ** bits for s in range(50))


@pytest.mark.parametrize("purpose, seed, error, message", [
    ("", 0, ValueError, "non-empty name without ':'"),
    ("a:b", 0, ValueError, "built-in purposes: train-prompts"),
    (SAMPLING, "3", TypeError, "must be integers"),
    (SAMPLING, True, TypeError, "must be integers"),
])
def test_bad_stream_names_are_errors(purpose, seed, error, message):
    with pytest.raises(error, match=message):
        stream_key(purpose, seed)


def test_bits_out_of_range():
    with pytest.raises(ValueError, match="bits must be in"):
        stream_seed(SAMPLING, 0, bits=65)


def test_heldout_prompts_are_no_seeds_training_prompts():
    task = InstructionFollowingTask()
    heldout = load_examples(task, "test", limit=200)  # what the ifollow-heldout evaluator uses
    held_texts = {ex.meta["prompt"] for ex in heldout}
    assert len(held_texts) == len(heldout)
    for seed in FORMER_COLLISIONS + [0]:
        train = load_examples(task, "train", limit=DEFAULT_SIZE, seed=seed)
        assert not held_texts & {ex.meta["prompt"] for ex in train}, seed
    for seed in range(51):
        train = load_examples(task, "train", limit=100, seed=seed)
        assert not held_texts & {ex.meta["prompt"] for ex in train}, seed
    assert {ex.id for ex in heldout}.isdisjoint(ex.id for ex in load_examples(task, "train", limit=300, seed=0))
    assert all(ex.id.startswith(f"gen-{HELDOUT_PROMPTS}-0-") for ex in heldout)


def test_dev_and_heldout_prompts_differ_for_the_same_seed():
    task = InstructionFollowingTask()
    dev = {ex.meta["prompt"] for ex in load_examples(task, "dev", limit=200)}
    assert not dev & {ex.meta["prompt"] for ex in load_examples(task, "test", limit=200)}
