"""bench/roofline.py: the passes it rebuilds from a sampling's prompts and lengths are the FLOPs
FlopCounterMode counts for that sampling, and their bytes are the weights and the cache they read."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.attention import use_for_rollout
from harness.backends import decode, rollout
from harness.models import load_model

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import roofline  # noqa: E402

PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]


@pytest.fixture(scope="module")
def model():
    tiny = load_model("tiny-random", dtype="float32")
    m = copy.deepcopy(tiny.model).eval().requires_grad_(False)
    use_for_rollout(m, "auto")
    return m, tiny.tokenizer


@pytest.mark.parametrize("share", [True, False])
def test_the_rebuilt_passes_count_what_flop_counter_counts(model, monkeypatch, share):
    """On transformers' dynamic cache (attention reads only the filled keys) the rebuilt passes' FLOPs
    are FlopCounterMode's for the same sampling, shared prefill or not, in chunks of rows."""
    m, tok = model
    monkeypatch.setattr(rollout, "preallocated_cache_supported", lambda _: False)
    monkeypatch.setattr(decode, "preallocated_cache_supported", lambda _: False)
    monkeypatch.setattr(rollout, "GENERATE_BATCH", 4)  # two chunks of 4 rows
    rows = [p for p in PROMPTS for _ in range(4)]
    torch.manual_seed(2)
    with FlopCounterMode(display=False) as counter:
        out = rollout.sample(m, tok, rows, [tok.eos_token_id], max_new_tokens=7, temperature=1.0, batch_size=4,
                             share_prompts=share)
    passes = roofline.sampling_passes(m, rows, [len(r) for r, _ in out], share_prompts=share, batch=4)
    assert sum(p.flops for p in passes) == counter.get_total_flops()
    prefills = [p for p in passes if not p.decoding]
    assert len(prefills) == (2 if share else 0)
    assert sum(p.decoding for p in passes) == max(len(r) for r, _ in out[:4]) + max(len(r) for r, _ in out[4:])


def test_a_decoding_pass_reads_the_weights_and_the_cache_it_attends(model):
    m, _ = model
    shape = roofline.ModelShape.of(m)
    weights = sum(p.numel() * 4 for n, p in m.named_parameters() if "embed_tokens" not in n)  # untied head: counted
    rows = [PROMPTS[0]] * 3
    first, second = roofline.sampling_passes(m, rows, [2, 2, 1])[1:]
    kv = m.config.num_hidden_layers * 2 * m.config.num_key_value_heads * (m.config.hidden_size // 4) * 4
    assert shape.kv_bytes_per_position == kv
    assert first.bytes == weights + 3 * 6 * kv and second.bytes == weights + 3 * 7 * kv
    read, compute, floor = roofline.roofline([first, second], 1e9, 1e9)
    assert floor == max(first.bytes, first.flops) / 1e9 + max(second.bytes, second.flops) / 1e9
    assert read == (first.bytes + second.bytes) / 1e9 and compute == (first.flops + second.flops) / 1e9


def test_pass_products_seconds_counts_every_linear_layer(monkeypatch):
    """One pass's products: each distinct shape timed once and counted for every layer of that shape
    (on a clock that advances one second per reading, every timing reads the same)."""
    from itertools import count

    from torch import nn

    ticks = count()
    monkeypatch.setattr(roofline.time, "perf_counter", lambda: float(next(ticks)))
    one = nn.Sequential(nn.Linear(32, 32, bias=False))
    two = nn.Sequential(nn.Linear(32, 32, bias=False), nn.Linear(32, 32, bias=False))
    mixed = nn.Sequential(nn.Linear(32, 32, bias=False), nn.Linear(32, 16, bias=False))
    a = roofline.pass_products_seconds(one, 4, seconds=0.5)
    assert a > 0
    assert roofline.pass_products_seconds(two, 4, seconds=0.5) == 2 * a  # timed once, counted twice
    assert roofline.pass_products_seconds(mixed, 4, seconds=0.5) == 2 * a  # two shapes, each timed
