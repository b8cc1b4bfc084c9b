"""bf16 linear layers on CPU with their weights kept in oneDNN's blocked layout: the rollout copy's
matrix products (sampling and replay) without reordering every weight at every call.

Why. On CPU, ``torch.nn.functional.linear`` on a bf16 weight hands oneDNN the weight in PyTorch's
plain layout, and oneDNN reorders it into its blocked layout at every call: for a decoding step of
the main job (16 rows) that reorder reads and writes every weight once more, and the step's matrix
products took about 1.5x as long as with the weight reordered once (``bench/README.md``). The rollout
copy's weights change only when the copy is synced after an update, so each layer here keeps its
reordered weight (``torch.ops.mkldnn._reorder_linear_weight``) and computes with
``torch.ops.mkldnn._linear_pointwise``, reordering again when the weight tensor changed (its
version counter moves with every in-place write, e.g. ``load_state_dict``).

Numerics. The same oneDNN kernel computes the same products: the outputs equal
``torch.nn.functional.linear``'s bit for bit (tested at the shapes the rollout runs, 1 and 2
threads), so the samples, the sampling pass the replay reuses, and the replay's relevance are
unchanged.

Only frozen bf16 ``nn.Linear`` layers on CPU are switched (no gradient flows through a packed
weight), and only where the running torch offers the two operators; others keep their forward.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch
from torch import Tensor, nn

#: the attribute a switched layer keeps its reordered weight and its key in
_PACKED = "_mrbench_packed"


def packing_available() -> bool:
    """Whether this torch has oneDNN's reorder and packed-linear operators and bf16 support on CPU."""
    mkldnn = getattr(torch.ops, "mkldnn", None)
    try:
        return (torch.backends.mkldnn.is_available() and mkldnn is not None
                and hasattr(mkldnn, "_reorder_linear_weight") and hasattr(mkldnn, "_linear_pointwise")
                and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class _Packed:
    """A layer's reordered weight and the key it was reordered for. A deep copy of the layer gets none
    and reorders its own weight at its first call: oneDNN's blocked tensor has no storage to copy."""

    __slots__ = ("key", "weight")

    def __init__(self, key: tuple[int, int], weight: Tensor):
        self.key, self.weight = key, weight

    def __deepcopy__(self, memo: dict) -> None:
        return None


def _packed_forward(self: nn.Linear, x: Tensor) -> Tensor:
    weight = self.weight
    if torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad) or x.dtype != weight.dtype:
        return nn.functional.linear(x, weight, self.bias)
    key = (weight.data_ptr(), weight._version)
    packed = getattr(self, _PACKED, None)
    if packed is None or packed.key != key:
        packed = _Packed(key, torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 16))
        object.__setattr__(self, _PACKED, packed)
    return torch.ops.mkldnn._linear_pointwise(x, packed.weight, self.bias, "none", [], "")


@functools.cache
def _count_packed_flops() -> None:
    """Make ``torch.utils.flop_counter.FlopCounterMode`` count a packed layer's matrix product
    (2 x rows x out x in), as it counts ``linear``'s (benchmarks count the replay's FLOPs with it)."""
    from torch.utils.flop_counter import register_flop_formula

    def flops(x_shape: Any, w_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
        rows = 1
        for n in x_shape[:-1]:
            rows *= n
        return 2 * rows * w_shape[0] * w_shape[1]

    try:
        register_flop_formula(torch.ops.mkldnn._linear_pointwise)(flops)
    except (RuntimeError, ValueError, AttributeError):  # already registered, or no such operator
        pass


def pack_linears(model: Any) -> int:
    """Switch every frozen bf16 ``nn.Linear`` of ``model`` on CPU to the packed forward (see the
    module docstring); returns how many were switched (0 where packing is not available)."""
    if not packing_available():
        return 0
    _count_packed_flops()
    switched = 0
    for module in model.modules():
        w = getattr(module, "weight", None)
        if (type(module) is nn.Linear and w is not None and w.dtype == torch.bfloat16 and w.device.type == "cpu"
                and not w.requires_grad):
            module.forward = types.MethodType(_packed_forward, module)
            switched += 1
    return switched


def is_packed(module: nn.Module) -> bool:
    """Whether ``module`` computes with the packed forward (:func:`pack_linears`)."""
    return type(module) is nn.Linear and module.__dict__.get("forward") is not None and \
        getattr(module.__dict__["forward"], "__func__", None) is _packed_forward


def unpack_linears(model: Any) -> None:
    """Back to ``nn.Linear``'s own forward, the reordered weights released."""
    for module in model.modules():
        if type(module) is nn.Linear and "forward" in module.__dict__:
            del module.forward
            if hasattr(module, _PACKED):
                object.__delattr__(module, _PACKED)
