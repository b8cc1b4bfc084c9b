"""The CPU step's floors: what this host reads and multiplies at best, and what a phase must read and
multiply, for ``profile_step.py``'s roofline table (and ``replay_overhead.py``'s replay floor).

- :func:`read_bandwidth`: bytes per second a sum over 1 GB reads (the fastest of 5, the run's threads);
- :func:`gemm_rate`: the fastest matrix-product rate at the model's own linear shapes (768 rows; each
  distinct weight shape through ``linear``, and through oneDNN's packed product where this torch has it);
- :func:`sampling_passes`: a sampling's forward passes (the shared prefill of each group's prompt,
  then one pass per decoding step over every row, as ``harness.backends.rollout.sample`` runs them)
  rebuilt from its rollouts' prompt and response lengths, each pass's matrix-product FLOPs (the
  decoder's linear layers at every position, the LM head at each row's last one, attention's two
  products over the keys each query attends: what ``FlopCounterMode`` counts for them, tested) and
  the bytes it must read (every weight it multiplies by, the LM head's included and the input
  embedding's rows not, and the cached keys and values it attends over);
- :func:`roofline`: a phase's floor, the larger of its bandwidth time and compute time, pass by pass.

Nothing here imports the harness's own sampler, so this file measures older commits too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

#: rows per sampling chunk (``harness.backends.rollout.GENERATE_BATCH``)
GENERATE_BATCH = 64


def read_bandwidth(megabytes: int = 1024, repeats: int = 5) -> float:
    """Bytes per second this process reads from memory: the fastest of ``repeats`` sums over a
    float32 tensor of ``megabytes`` (far larger than the caches), with torch's current threads."""
    x = torch.ones(megabytes * (1 << 20) // 4)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        float(x.sum())
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best


def gemm_rate(model: Any, rows: int = 768, seconds: float = 0.5, dtype: torch.dtype | None = None) -> tuple[float, str]:
    """The fastest GFLOP/s of ``rows`` positions through one of the model's own linear layers (each
    distinct weight shape once: the decoder's projections and the LM head), in ``dtype`` (default:
    the weights') at torch's current thread count, by ``linear`` and, for bf16 where this torch has
    it, by oneDNN's product on a weight reordered once; and the shape (and way) that reached it."""
    shapes = {tuple(m.weight.shape): m.weight for m in model.modules() if isinstance(m, nn.Linear)}
    best, where = 0.0, ""
    with torch.inference_mode():
        for (out_f, in_f), weight in shapes.items():
            w = weight.detach().to(dtype or weight.dtype)
            x = torch.randn(rows, in_f, dtype=w.dtype, device=w.device)
            ways = {"linear": lambda x=x, w=w: nn.functional.linear(x, w)}
            if w.dtype == torch.bfloat16 and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"):
                try:
                    packed = torch.ops.mkldnn._reorder_linear_weight(w, rows)
                    ways["packed"] = lambda x=x, p=packed: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")
                except RuntimeError:
                    pass
            for name, product in ways.items():
                rate = 2.0 * rows * in_f * out_f / _seconds_per_call(product, seconds) / 1e9
                if rate > best:
                    best, where = rate, f"[{rows}, {in_f}] x [{in_f}, {out_f}] {w.dtype} ({name})"
    return best, where


def pass_products_seconds(model: Any, rows: int, seconds: float = 0.2) -> float:
    """Seconds one pass of ``rows`` positions spends in the model's linear products, each layer's
    product timed at its own shape (each distinct shape once, times the layers of that shape; the LM
    head included) as the rollout computes it (oneDNN's product on a reordered weight for bf16 where
    this torch has it, else ``linear``), at torch's current thread count: what a decoding pass's
    products cost at its batch, against the floor's fastest rate at 768 rows. Each product repeats on
    one weight, which the caches then hold where it fits (the decoder's layers, not the LM head):
    a lower bound on the products of a pass that streams every weight from memory."""
    counts: dict[tuple[int, int], int] = {}
    weights: dict[tuple[int, int], torch.Tensor] = {}
    for m in model.modules():
        if isinstance(m, nn.Linear):
            shape = tuple(m.weight.shape)
            counts[shape] = counts.get(shape, 0) + 1
            weights.setdefault(shape, m.weight)
    total = 0.0
    with torch.inference_mode():
        for shape, weight in weights.items():
            w = weight.detach()
            x = torch.randn(rows, shape[1], dtype=w.dtype, device=w.device)
            product = lambda x=x, w=w: nn.functional.linear(x, w)  # noqa: E731
            if w.dtype == torch.bfloat16 and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"):
                packed = torch.ops.mkldnn._reorder_linear_weight(w, rows)
                product = lambda x=x, p=packed: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")  # noqa: E731
            total += counts[shape] * _seconds_per_call(product, seconds)
    return total


def _seconds_per_call(product: Any, seconds: float) -> float:
    """The mean seconds of ``product()`` over at least 3 calls and ``seconds``, after one untimed call
    (first-call setup)."""
    product()
    n, t0 = 0, time.perf_counter()
    while n < 3 or time.perf_counter() - t0 < seconds:
        product()
        n += 1
    return (time.perf_counter() - t0) / n


@dataclass(frozen=True)
class ModelShape:
    """What a pass of a decoder LM multiplies: multiply-adds per position in the decoder's linear
    layers and their bytes (norms included), the LM head's, its layers and attention heads, and the
    key/value cache's bytes per position."""

    decoder_macs: int
    decoder_bytes: int
    head_macs: int
    head_bytes: int
    layers: int
    heads: int
    head_dim: int
    kv_bytes_per_position: int

    @classmethod
    def of(cls, model: Any) -> ModelShape:
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        decoder, head = base.get_decoder(), base.get_output_embeddings()
        config = base.config.get_text_config(decoder=True)
        embedding = decoder.get_input_embeddings().weight
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        size = head.weight.element_size()
        return cls(decoder_macs=sum(m.weight.numel() for m in decoder.modules() if isinstance(m, nn.Linear)),
                   decoder_bytes=sum(p.numel() * p.element_size() for p in decoder.parameters() if p is not embedding),
                   head_macs=head.weight.numel(), head_bytes=head.weight.numel() * size, layers=config.num_hidden_layers,
                   heads=heads, head_dim=head_dim,
                   kv_bytes_per_position=config.num_hidden_layers * 2 * kv_heads * head_dim * size)


@dataclass(frozen=True)
class Pass:
    """One forward pass: matrix-product FLOPs and the bytes it must read; ``decoding``: a pass of the
    decoding loop (one new position per row), else a prefill."""

    flops: float
    bytes: float
    decoding: bool


def sampling_passes(model: Any, prompts: Sequence[Sequence[int]], lengths: Sequence[int],
                    share_prompts: bool = True, batch: int = GENERATE_BATCH) -> list[Pass]:
    """The passes of sampling responses of ``lengths`` tokens for the rows ``prompts`` (a group's rows
    consecutive), chunk by chunk of ``batch`` rows: the shared prefill of each distinct prompt but its
    last token (where a prompt repeats), then one pass per decoding step until the chunk's longest
    response, every row attending over the left-padded width plus the steps so far. Attention is
    counted over the whole block of queries and keys, masked entries included, as the products
    compute it."""
    shape = ModelShape.of(model)
    out: list[Pass] = []
    for start in range(0, len(prompts), batch):
        rows, steps = prompts[start:start + batch], max(lengths[start:start + batch])
        b, width = len(rows), max(len(p) for p in rows)
        distinct = len({tuple(p) for p in rows})
        shared = share_prompts and distinct < b and min(len(p) for p in rows) >= 2
        past = width - 1 if shared else 0
        if shared:  # each query position attends over all `past` keys (the mask zeroes the future)
            out.append(Pass(2.0 * distinct * past * shape.decoder_macs
                            + 4.0 * shape.layers * distinct * shape.heads * shape.head_dim * past * past,
                            float(shape.decoder_bytes), False))
        for step in range(steps):
            new = width - past if step == 0 else 1  # the first pass runs the prompts' unshared part
            keys = past + new if step == 0 else width + step
            out.append(Pass(2.0 * b * (new * shape.decoder_macs + shape.head_macs)  # the head at the last position
                            + 4.0 * shape.layers * b * shape.heads * shape.head_dim * new * keys,
                            float(shape.decoder_bytes + shape.head_bytes + b * keys * shape.kv_bytes_per_position),
                            True))
    return out


def roofline(passes: Sequence[Pass], bandwidth: float, rate: float) -> tuple[float, float, float]:
    """(seconds to read the passes' bytes at ``bandwidth`` B/s, seconds to multiply their FLOPs at
    ``rate`` FLOP/s, the floor: pass by pass the larger of the two, summed)."""
    read = sum(p.bytes for p in passes) / bandwidth
    compute = sum(p.flops for p in passes) / rate
    return read, compute, sum(max(p.bytes / bandwidth, p.flops / rate) for p in passes)
