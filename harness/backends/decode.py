"""The local sampler's decoding loop: a batch of left-padded prompts continued token by token with
the model's own forward pass, on a key/value cache written in place.

Each pass is the forward call transformers' ``generate`` makes for the same batch (the new tokens,
the whole attention mask, positions counted over real tokens, ``logits_to_keep=1``), followed by its
logits processors for temperature, top-k and top-p (transformers' own classes); finished rows
continue with the pad token. So the hidden states and logits of a pass (which the replay reuses as
the sampling pass) are bit for bit ``generate``'s for the same tokens (``tests/test_decode.py``).
Two things differ:

- the draw (:func:`draw`): inverse-CDF sampling in two levels in float64, one uniform number per
  row, where ``torch.multinomial`` (``generate``'s) draws one exponential variate per vocabulary
  entry, serially: 16 ms of CPU per decoding step of the main job (16 rows of 49,152 entries)
  against 0.3 ms. Each token has the same probability (up to float64 rounding, against
  ``multinomial``'s float32), but a seed draws other tokens than ``generate`` did, so records made
  before this draw do not repeat token for token; ``bench/sampling_distribution.py`` checks that the
  rewards and lengths of 256 responses agree within their sampling error. With ``multinomial`` as
  the draw, the loop draws ``generate``'s tokens (tested);
- the cache (:func:`preallocated_cache`): every layer's keys and values live in zero-filled
  buffers written in place, grown a few positions at a time, and the attention
  (:mod:`harness.attention`) reads them up to the mask's width, which changes no output bit;
  ``generate``'s dynamic cache concatenates each layer's whole cache again at every step (a fifth
  of a CPU decoding step of the main job in a profile, the fresh allocations included).

What a sampling runs (its passes, rows and keys) follows from its prompts and response lengths;
``bench/roofline.py`` counts each pass's FLOPs and bytes from them (``bench/profile_step.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

#: positions a decoding cache's buffers grow by (the attention reads the whole buffer, so a smaller
#: step wastes less of its work; each growth copies the cache once)
CACHE_GROWTH = 32


@functools.cache
def _preallocated_layer_class() -> type:
    """A transformers ``DynamicLayer`` whose keys and values live in zero-filled buffers, written in
    place and grown by :data:`CACHE_GROWTH` positions when full. ``update`` returns the whole
    buffers, and the layer's length (``get_seq_length``, from which transformers sizes the mask)
    says how much of them is filled: :func:`harness.attention.grouped_matmul_attention` reads the
    keys up to the mask's width and gives the rest weight 0, which leaves every output bit equal to
    attention over the filled keys alone (tested), without copying the cache at every step."""
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        def __init__(self, limit: int) -> None:
            super().__init__()
            self.limit, self.length = limit, 0
            self.keys = self.values = None

        def _grow(self, need: int, key_states: Tensor, value_states: Tensor) -> None:
            if need > self.limit:
                raise RuntimeError(f"decoding cache full: {need} positions, at most {self.limit}")
            size = min(self.limit, -(-need // CACHE_GROWTH) * CACHE_GROWTH)
            b, h, _, d = key_states.shape
            keys = key_states.new_zeros((b, h, size, d))
            values = value_states.new_zeros((b, value_states.shape[1], size, value_states.shape[-1]))
            if self.keys is not None and self.values is not None:
                keys[:, :, :self.length] = self.keys[:, :, :self.length]
                values[:, :, :self.length] = self.values[:, :, :self.length]
            self.keys, self.values = keys, values
            self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True

        def update(self, key_states: Tensor, value_states: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
            n, new = self.length, key_states.shape[-2]
            if self.keys is None or n + new > self.keys.shape[-2]:
                self._grow(n + new, key_states, value_states)
            self.keys[:, :, n:n + new] = key_states
            self.values[:, :, n:n + new] = value_states
            self.length = n + new
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

    return PreallocatedLayer


def preallocated_cache(model: Any, capacity: int, prefix: Any = None) -> Any:
    """A transformers ``DynamicCache`` for ``model`` whose layers write in place into buffers of at
    most ``capacity`` positions (:func:`_preallocated_layer_class`), holding ``prefix`` (a cache of the
    prompts' first tokens, e.g. :func:`harness.backends.rollout.shared_prefill`'s) when given."""
    from transformers import DynamicCache

    cache = DynamicCache()
    n_layers = model.config.get_text_config(decoder=True).num_hidden_layers
    layer = _preallocated_layer_class()
    cache.layers = [layer(capacity) for _ in range(n_layers)]
    if prefix is not None:
        for layer, old in zip(cache.layers, prefix.layers):
            if old.keys is not None and old.keys.numel():
                layer.update(old.keys, old.values)
    return cache


def preallocated_cache_supported(model: Any) -> bool:
    """Whether :func:`preallocated_cache` is exact for ``model``: its attention is
    :mod:`harness.attention`'s grouped matmuls (which read a buffer only up to the mask's width)
    and every layer is full attention without a sliding window (a layer whose cache keeps nothing
    but keys and values). Other models decode on transformers' own ``DynamicCache``."""
    from harness.attention import NAME

    config = model.config.get_text_config(decoder=True)
    types = set(getattr(config, "layer_types", None) or ["full_attention"])
    window = getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True)
    return getattr(config, "_attn_implementation", None) == NAME and types == {"full_attention"} and not window


def logits_warpers(temperature: float, top_k: int | None, top_p: float) -> Any:
    """transformers' own processors for the sampling settings, in ``generate``'s order
    (temperature, top-k, top-p); an empty list for plain sampling at temperature 1."""
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k:
        warpers.append(TopKLogitsWarper(top_k=top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=top_p))
    return warpers


#: entries per block of the two-level draw (:func:`draw`)
DRAW_BLOCK = 256


def _below(x: Tensor, limit: Tensor) -> Tensor:
    """``x`` capped at the largest float below ``limit`` (so that ``x < limit`` holds after rounding)."""
    return torch.minimum(x, torch.nextafter(limit, torch.zeros_like(limit)))


def draw(probs: Tensor) -> Tensor:
    """One token per row of ``probs [B, V]`` (non-negative, float32, each row summing to about 1),
    by inverse-CDF sampling in two levels, in float64: a uniform number ``u`` per row picks the block of
    :data:`DRAW_BLOCK` entries where the cumulative sum of the block sums passes ``u`` times the
    row's total, and ``u``'s remaining fraction picks the entry in that block the same way. Token i
    is drawn with probability ``p_i / sum(p)`` up to float64 rounding; an entry of probability 0
    is never drawn (each search lands where the cumulative sum strictly increases). One uniform
    draw per row from torch's generator, a few small operations, and no pass over the vocabulary
    beyond the block sums."""
    b, v = probs.shape
    pad = (-v) % DRAW_BLOCK
    blocks = (torch.nn.functional.pad(probs, (0, pad)) if pad else probs).view(b, -1, DRAW_BLOCK)
    sums = blocks.sum(-1, dtype=torch.float64)  # [B, blocks]
    ends = sums.cumsum(-1)
    total = ends[:, -1:]
    u = _below(torch.rand(b, 1, dtype=torch.float64, device=probs.device) * total, total)
    j = torch.searchsorted(ends, u, right=True)  # ends[j] > u >= ends[j - 1]: block j has mass
    frac = ((u - (ends.gather(1, j) - sums.gather(1, j))) / sums.gather(1, j)).clamp_(0.0, 1.0)
    inner = blocks.gather(1, j[:, :, None].expand(b, 1, DRAW_BLOCK)).squeeze(1).cumsum(-1, dtype=torch.float64)
    k = torch.searchsorted(inner, _below(frac * inner[:, -1:], inner[:, -1:]), right=True)
    return (j * DRAW_BLOCK + k).squeeze(1)


#: the attribute a model keeps its decoding step in (on the model, not in a table keyed by it: the
#: step holds the model, so a table's entry would keep every rollout copy alive)
_STEP_ATTR = "_mrbench_decode_step"


def decode_step_for(model: Any) -> Any:
    """The model's :class:`harness.backends.decode_step.DecodeStep` (built once per model), or None
    where the model's own forward runs the decoding passes."""
    from harness.backends.decode_step import DecodeStep

    if not DecodeStep.supports(model):
        return None
    step = model.__dict__.get(_STEP_ATTR)
    if step is None:
        step = DecodeStep(model)
        object.__setattr__(model, _STEP_ATTR, step)  # not a submodule: no state_dict entry, no parameters
    return step


@torch.no_grad()
def decode(model: Any, ids: Tensor, mask: Tensor, *, max_new_tokens: int, eos: Sequence[int], pad_id: int,
           sampled: bool, warpers: Any = None, cache: Any = None) -> Tensor:
    """The generated tokens ``[B, steps]`` (``steps <= max_new_tokens``; a row after its first
    end-of-turn token holds ``pad_id``) for the left-padded prompts ``ids``/``mask [B, L]``.

    ``cache``: a :func:`preallocated_cache` already holding the first ``P < L`` positions of every
    row (a shared prefill); the first pass then runs only the rest. ``sampled``: draw from the
    softmax of the (warped) float32 logits (:func:`draw`), else take the argmax."""
    b, width = ids.shape
    past = cache.get_seq_length() if cache is not None else 0
    if cache is None:
        cache = preallocated_cache(model, width + max_new_tokens) if preallocated_cache_supported(model) else None
    if cache is None:
        from transformers import DynamicCache

        cache = DynamicCache(config=model.config)
    step = decode_step_for(model)
    stops = torch.tensor(sorted({int(e) for e in eos}), device=ids.device)
    positions = (mask.long().cumsum(-1) - 1).masked_fill_(mask == 0, 0)
    inputs, pos, attention = ids[:, past:], positions[:, past:], mask
    unfinished = torch.ones(b, dtype=torch.bool, device=ids.device)
    out = ids.new_full((b, max_new_tokens), pad_id)
    steps = 0
    while steps < max_new_tokens:
        if step is not None and inputs.shape[1] == 1:
            logits = step(inputs, attention, pos, cache)
        else:
            logits = model(input_ids=inputs, attention_mask=attention, position_ids=pos, past_key_values=cache,
                           use_cache=True, logits_to_keep=1).logits
        scores = logits[:, -1].to(dtype=torch.float32, copy=True)
        if sampled:
            if warpers:
                scores = warpers(None, scores)
            token = draw(torch.softmax(scores, dim=-1))
        else:
            token = torch.argmax(scores, dim=-1)
        token = torch.where(unfinished, token, pad_id)
        out[:, steps] = token
        steps += 1
        unfinished &= ~torch.isin(token, stops)
        if not bool(unfinished.any()):
            break
        inputs = token[:, None]
        pos = pos[:, -1:] + 1
        attention = torch.cat([attention, attention.new_ones((b, 1))], dim=-1)
    return out[:, :steps]
