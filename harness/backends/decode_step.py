"""One decoding pass of a Llama-family rollout copy in fewer operations, bit for bit the model's own.

Why. A decoding pass of SmolLM2-135M runs 30 layers of transformers' modules: about 8,000 operator
calls and the modules' Python around them cost about 20 ms of CPU per pass (measured on a copy of
the model with negligible arithmetic), against about 20 ms for the pass's matrix products at two
threads. :class:`DecodeStep` runs the same arithmetic with far fewer calls: the query, key and value
projections as one product and the gate and up projections as another (oneDNN's packed product of
the concatenated weights, whose outputs equal the separate products' bit for bit, tested), the
rotary embedding applied to the queries and keys together (the same elementwise operations), the
additive mask built once per pass, and no module dispatch inside a layer. The final norm and the LM
head are still called as modules, so the sampler's hooks (the hidden states and logits the replay
reuses) see what they saw.

Where. Only the decoding passes (one new token per row) of a bf16 copy on CPU whose linear layers are
packed (:mod:`harness.packed_linear`), with :mod:`harness.attention`'s grouped-matmul attention, for
model types whose layers are exactly transformers' Llama layer (``llama``; ``qwen2``, which adds
biases to the query, key and value projections), SiLU MLPs and no adapter;
:meth:`DecodeStep.supports` says no elsewhere, and the sampler calls the model. ``tests/test_decode.py``
checks the logits and hidden states against the model's forward on Llama- and Qwen2-shaped models.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

#: model types whose decoder layer is transformers' Llama layer (Qwen2: with query/key/value biases)
SUPPORTED_MODEL_TYPES = frozenset({"llama", "qwen2"})


class _FusedLinear:
    """The products of several linear layers over one input as one packed product of their
    concatenated weights (and biases), reordered again when any weight tensor changed."""

    def __init__(self, layers: list[nn.Linear]):
        self.layers, self.key, self.weight, self.bias = layers, None, None, None

    def __call__(self, x: Tensor) -> Tensor:
        key = tuple((m.weight.data_ptr(), m.weight._version) for m in self.layers)
        if key != self.key:
            weight = torch.cat([m.weight.detach() for m in self.layers])
            self.weight = torch.ops.mkldnn._reorder_linear_weight(weight, 16)
            biases = [m.bias for m in self.layers]
            self.bias = None if all(b is None for b in biases) else torch.cat(
                [b.detach() if b is not None else m.weight.new_zeros(m.weight.shape[0])
                 for m, b in zip(self.layers, biases)])
            self.key = key
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")


def _rms_norm(norm: nn.Module, x: Tensor) -> Tensor:
    """transformers' Llama RMSNorm, its operations in its order."""
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    return norm.weight * (h * torch.rsqrt(variance + norm.variance_epsilon)).to(x.dtype)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecodeStep:
    """The decoding pass of one model (see the module docstring): ``step(ids [B, 1], attention_mask
    [B, L], position_ids [B, 1], cache)`` -> logits ``[B, 1, V]``, writing the new keys and values
    into ``cache`` as the model's forward would."""

    def __init__(self, model: Any):
        from harness.attention import grouped_matmul_attention

        self.attention = grouped_matmul_attention
        self.model, self.decoder, self.head = model, model.model, model.lm_head
        config = model.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.intermediate = config.intermediate_size
        self.layers = []
        for layer in self.decoder.layers[:config.num_hidden_layers]:
            attn, mlp = layer.self_attn, layer.mlp
            self.layers.append((layer.input_layernorm, _FusedLinear([attn.q_proj, attn.k_proj, attn.v_proj]),
                                attn.o_proj, attn.scaling, layer.post_attention_layernorm,
                                _FusedLinear([mlp.gate_proj, mlp.up_proj]), mlp.down_proj))

    def __deepcopy__(self, memo: dict) -> None:
        """A deep copy of the model gets no step (its fused weights are oneDNN tensors with no storage to
        copy, and they would be the original's): :func:`harness.backends.decode.decode_step_for` builds
        the copy its own."""
        return None

    @staticmethod
    def supports(model: Any) -> bool:
        """Whether the step computes ``model``'s own arithmetic (see the module docstring)."""
        from harness.attention import NAME
        from harness.packed_linear import is_packed

        config = getattr(model, "config", None)
        if (config is None or hasattr(model, "peft_config") or getattr(config, "model_type", "") not in
                SUPPORTED_MODEL_TYPES or getattr(config, "hidden_act", "") != "silu" or model.training
                or getattr(config, "_attn_implementation", None) != NAME or getattr(config, "mlp_bias", False)
                or getattr(config, "use_sliding_window", False)):
            return False
        layers = model.model.layers[:config.num_hidden_layers]
        linears = [m for layer in layers for m in layer.modules() if isinstance(m, nn.Linear)]
        return bool(linears) and all(is_packed(m) for m in [*linears, model.lm_head]) and all(
            type(layer.mlp.act_fn).__name__ in ("SiLU", "SiLUActivation") for layer in layers)

    def __call__(self, ids: Tensor, attention_mask: Tensor, position_ids: Tensor, cache: Any) -> Tensor:
        b = ids.shape[0]
        x = self.decoder.embed_tokens(ids)
        cos, sin = self.decoder.rotary_emb(x, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        dtype = x.dtype
        mask = torch.zeros(attention_mask.shape, dtype=dtype, device=x.device).masked_fill_(
            attention_mask == 0, torch.finfo(dtype).min)[:, None, None, :]
        q_width, k_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for i, (norm1, qkv, o_proj, scaling, norm2, gate_up, down) in enumerate(self.layers):
            h = qkv(_rms_norm(norm1, x))  # [B, 1, (heads + 2 kv_heads) x head_dim]
            qk = h[..., :q_width + k_width].view(b, 1, self.heads + self.kv_heads, self.head_dim).transpose(1, 2)
            qk = (qk * cos) + (_rotate_half(qk) * sin)
            value = h[..., q_width + k_width:].view(b, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            keys, values = cache.update(qk[:, self.heads:], value, i)
            out, _ = self.attention(None, qk[:, :self.heads], keys, values, mask, scaling=scaling)
            x = x + o_proj(out.reshape(b, 1, -1))
            h = gate_up(_rms_norm(norm2, x))
            x = x + down(nn.functional.silu(h[..., :self.intermediate]) * h[..., self.intermediate:])
        return self.head(self.decoder.norm(x))
