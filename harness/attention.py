"""Grouped-query attention as two batched matmuls: the CPU rollout copy's attention (sampling and replay).

Why. On CPU, PyTorch's fused ``scaled_dot_product_attention`` kernel was slower than
scores-softmax-values as matmuls for the shapes the old policy runs (a few sequences of a few
hundred tokens in bf16, and single-token decoding steps; figures in ``bench/README.md``). On an
Intel Xeon with AMX its grouped-query form is faster for a decoding step (0.6x per layer alone,
0.96x of a whole pass), but it computes other arithmetic than the replay's matmuls, and the sampling
pass is kept the replay's arithmetic (below).
transformers' own ``eager`` path is matmuls too, but it first copies every key and value head
``num_attention_heads / num_key_value_heads`` times; here the query heads of one key/value head
are folded into the query axis instead, so the cache is read as it is.

Numerics. Scores come out of the matmul in the model's dtype (as in ``eager``); scaling, mask and
softmax run in float32 (or wider), and the probabilities return to the model's dtype for the
value matmul. A query row's result depends only on its own scores, not on the fused kernel's
tiling of the batch, so bf16 passes over the same tokens agree better: the JS distance q between a
response's sampling logits and its replay under the same prompt (ideally 0) is smaller than with
``sdpa`` (``bench/relevance_floor.py``; figures in ``bench/README.md``); what remains comes from
the bf16 linear layers. In float32 it equals ``sdpa`` to rounding (tested).

Registered with transformers' attention and mask interfaces under :data:`NAME` (the additive
float mask of ``eager``). :func:`use_for_rollout` switches a model to it where it is known to be
exact: decoder families whose attention is plain softmax attention with at most a sliding window
(the window lives in the mask). Others keep their implementation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

NAME = "mrbench_grouped_matmul"
#: the policy update's attention under bf16 autocast on CPU (:func:`float32_matmul_attention`)
TRAIN_NAME = "mrbench_float32_matmul"

#: query rows up to which float32 attention runs as matmuls (decoding steps); longer float32 blocks
#: (prefill, replay rows) go to the fused kernel with grouped-query support, which is faster there
#: in float32 (in bf16 the matmuls are faster at every shape the rollout runs)
DECODE_ROWS = 8

#: model types whose attention takes nothing this function ignores (no logit soft-cap, no sinks)
SUPPORTED_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3", "smollm3", "olmo2"})


def grouped_matmul_attention(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                             scaling: float | None = None, dropout: float = 0.0, **kwargs: Any) -> tuple[Tensor, None]:
    """query [B, H, Lq, D], key/value [B, Hkv, Lk, D], mask [B, 1, Lq, Lk] additive or boolean (True:
    attend), or None (causal over the last Lq keys) -> (output [B, Lq, H, D], None), the layout transformers' modules expect."""
    lk = key.shape[2]
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    # keys and values longer than the mask: a preallocated decoding cache's buffers
    # (harness.backends.decode), filled up to the mask's width and zero beyond it
    filled = lk if attention_mask is None else min(lk, attention_mask.shape[-1])
    if query.dtype == torch.float32 and query.shape[2] > DECODE_ROWS:
        return _fused_float32(query, key[:, :, :filled], value[:, :, :filled], attention_mask, scale, dropout,
                              module), None
    return _grouped_matmuls(module, query, key, value, attention_mask, scale, dropout, filled), None


def float32_matmul_attention(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                             scaling: float | None = None, dropout: float = 0.0, **kwargs: Any) -> tuple[Tensor, None]:
    """The policy update's attention under bf16 autocast on CPU (:data:`TRAIN_NAME`): the grouped matmuls
    of :func:`grouped_matmul_attention` with the queries, keys and values in float32 and autocast off
    inside, so scores, softmax, the value product and their backward run in float32; the output
    returns in the query's dtype. Faster than the fused kernel's backward at the update's shapes
    (a prompt's group of responses, a few hundred keys), and closer to a float32 update's gradient
    than ``sdpa`` or ``eager`` (whose scores come out of a bf16 matmul) under autocast (figures in
    ``bench/README.md``)."""
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    with torch.autocast(device_type=query.device.type, enabled=False):
        out = _grouped_matmuls(module, query.float(), key.float(), value.float(), attention_mask, scale, dropout,
                               key.shape[2])
    return out.to(query.dtype), None


def _grouped_matmuls(module: Any, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                     scale: float, dropout: float, filled: int) -> Tensor:
    """Scores, softmax and values as two batched matmuls over the keys up to ``filled`` (the rest weight 0)."""
    b, heads, lq, d = query.shape
    kv_heads, lk = key.shape[1], key.shape[2]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not group over {kv_heads} key/value heads")
    group = heads // kv_heads
    # head h reads key/value head h // group, so the query heads of a key/value head fold into its
    # query axis: [B, H, Lq, D] -> [B, Hkv, group * Lq, D] (a copy after rotary embeddings, a view
    # when decoding); keys and values are read as they are
    scores = torch.matmul(query.reshape(b, kv_heads, group * lq, d), key.transpose(2, 3))
    scores = scores.view(b, kv_heads, group, lq, lk)[..., :filled]
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32)).mul_(scale)
    if attention_mask is not None and attention_mask.dtype == torch.bool:  # True = attend
        scores.masked_fill_(~attention_mask[:, :, None, :, :filled], float("-inf"))
    elif attention_mask is not None:
        scores.add_(attention_mask[:, :, None, :, :filled])
    elif lq > 1:
        future = torch.ones(lq, lk, dtype=torch.bool, device=query.device).triu_(lk - lq + 1)
        scores.masked_fill_(future, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    if dropout and getattr(module, "training", False):
        probs = torch.nn.functional.dropout(probs, p=dropout)
    if filled < lk:  # weight 0 on the unfilled positions: each output equals the filled prefix's, bit for bit
        probs = torch.nn.functional.pad(probs, (0, lk - filled))
    out = torch.matmul(probs.reshape(b, kv_heads, group * lq, lk), value)
    return out.view(b, heads, lq, d).transpose(1, 2).contiguous()


def _fused_float32(query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None, scale: float,
                   dropout: float, module: Any) -> Tensor:
    """Many query rows in float32: the fused kernel, grouped-query aware (no key/value copies)."""
    lq, lk = query.shape[2], key.shape[2]
    mask = attention_mask[:, :, :, :lk] if attention_mask is not None else None
    if mask is None and lq > 1:  # causal over the last lq keys (the cache holds the rest)
        mask = ~torch.ones(lq, lk, dtype=torch.bool, device=query.device).triu_(lk - lq + 1)
    p = dropout if dropout and getattr(module, "training", False) else 0.0
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=p,
                                                           scale=scale, enable_gqa=True)
    return out.transpose(1, 2).contiguous()


def register() -> None:
    """Make :data:`NAME` known to transformers (idempotent)."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(NAME, grouped_matmul_attention)
    AttentionMaskInterface.register(NAME, eager_mask)
    AttentionInterface.register(TRAIN_NAME, float32_matmul_attention)
    AttentionMaskInterface.register(TRAIN_NAME, eager_mask)


def use_for_rollout(model: Any, choice: str = "auto") -> str:
    """Set the attention implementation of the model that samples and replays; returns the one in use.

    ``choice``: "auto" (grouped matmuls on CPU for :data:`SUPPORTED_MODEL_TYPES`, else unchanged),
    "grouped_matmul" (the same, an error for other model types), "default" (unchanged), or any
    implementation name transformers knows ("sdpa", "eager", ...)."""
    from harness.replay import unwrap

    base = unwrap(model)
    config = base.config
    current = getattr(config, "_attn_implementation", None) or "eager"
    model_type = getattr(config, "model_type", "")
    if choice == "default":
        return current
    if choice in ("auto", "grouped_matmul"):
        on_cpu = next(base.parameters()).device.type == "cpu"
        if model_type not in SUPPORTED_MODEL_TYPES:
            if choice == "grouped_matmul":
                raise ValueError(f"grouped_matmul attention supports model types {sorted(SUPPORTED_MODEL_TYPES)}; "
                                 f"this model is {model_type!r}")
            return current
        if choice == "auto" and not on_cpu:
            return current
        register()
        choice = NAME
    base.set_attn_implementation(choice)
    return base.config._attn_implementation


def use_for_training(model: Any, choice: str = "auto", compute_dtype: torch.dtype = torch.float32) -> str:
    """Set the attention implementation of the policy the update trains; returns the one in use.

    ``choice``: "auto" (:func:`float32_matmul_attention` on CPU for :data:`SUPPORTED_MODEL_TYPES` when
    the update computes in bf16 under autocast, else unchanged), "float32_matmul" (the same, an
    error for other model types), "default" (unchanged), or any name transformers knows."""
    from harness.replay import unwrap

    base = unwrap(model)
    config = base.config
    current = getattr(config, "_attn_implementation", None) or "eager"
    if choice == "default":
        return current
    if choice in ("auto", "float32_matmul"):
        supported = getattr(config, "model_type", "") in SUPPORTED_MODEL_TYPES
        if choice == "float32_matmul" and not supported:
            raise ValueError(f"float32_matmul attention supports model types {sorted(SUPPORTED_MODEL_TYPES)}; "
                             f"this model is {config.model_type!r}")
        on_cpu = next(base.parameters()).device.type == "cpu"
        if choice == "auto" and not (supported and on_cpu and compute_dtype != torch.float32):
            return current
        register()
        choice = TRAIN_NAME
    base.set_attn_implementation(choice)
    return base.config._attn_implementation


@contextlib.contextmanager
def rollout_attention(model: Any, choice: str = "auto") -> Iterator[str]:
    """:func:`use_for_rollout` for the duration of a block, then the model's own implementation again:
    a model that both samples and trains (float32 rollouts share the training copy) samples and
    replays with the rollout attention and trains with its own. Yields the implementation in use."""
    from harness.replay import unwrap

    base = unwrap(model)
    before = getattr(base.config, "_attn_implementation", None) or "eager"
    name = use_for_rollout(model, choice)
    try:
        yield name
    finally:
        if name != before:
            base.set_attn_implementation(before)
