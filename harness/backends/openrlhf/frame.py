"""mrbench's token tensors in and out of OpenRLHF's frame.

mrbench indexes a response's tokens from 0 (``[B, T]``, valid where ``response_mask`` is True).
An OpenRLHF ``Experience`` holds b samples right-padded to one length L: ``sequences[b, L]`` is
prompt + response + padding, and every per-token tensor (``action_mask``, log-probabilities,
``advantages``) is ``[b, L-1]`` in the shifted frame, where column c predicts token c + 1. A
response of n tokens after a prompt of P tokens therefore occupies columns ``P-1 ... P+n-2``,
and since prompts differ in length, so does the first column of each row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


class FrameError(ValueError):
    """A frame that does not have the layout described in the module docstring."""


def response_columns(action_mask: Tensor) -> tuple[Tensor, Tensor]:
    """(first column [b], length [b]) of each row's response in a ``[b, L-1]`` action mask; rows
    without a response get (0, 0). A response must be one contiguous run of columns."""
    mask = action_mask.bool()
    if mask.dim() != 2:
        raise FrameError(f"action_mask must be [b, L-1], got shape {tuple(mask.shape)}")
    length = mask.sum(1)
    first = torch.where(length > 0, mask.int().argmax(1), torch.zeros_like(length))
    cols = torch.arange(mask.shape[1], device=mask.device)
    inside = (cols >= first[:, None]) & (cols < (first + length)[:, None])
    if bool((inside != mask).any()):
        bad = int((inside != mask).any(1).nonzero()[0])
        raise FrameError(f"row {bad}: the response is not one contiguous run of action_mask columns")
    return first, length


def split_sequence(sequence: Tensor, action_mask: Tensor, attention_mask: Tensor | None = None
                   ) -> tuple[list[int], list[int]]:
    """(prompt ids, response ids) of one row: ``sequence[L]`` with its ``action_mask[L-1]`` (and
    ``attention_mask[L]``, which gives the prompt of a row without a response)."""
    first, length = response_columns(action_mask.reshape(1, -1))
    n, c0 = int(length[0]), int(first[0])
    ids = [int(t) for t in sequence.reshape(-1).tolist()]
    if n == 0:
        end = int(attention_mask.sum()) if attention_mask is not None else len(ids)
        return ids[:end], []
    return ids[:c0 + 1], ids[c0 + 1:c0 + 1 + n]


def scatter_rows(values: Tensor, index: Sequence[int], action_mask: Tensor) -> Tensor:
    """``values[B, T]`` (mrbench, response-aligned) into the ``[b, L-1]`` frame of one experience
    whose row r holds sample ``index[r]``: row r's response columns get ``values[index[r], :n]``,
    every other column 0. A response longer than T is an error, not a silent truncation."""
    first, length = response_columns(action_mask)
    if len(index) != action_mask.shape[0]:
        raise FrameError(f"{len(index)} sample indices for {action_mask.shape[0]} rows")
    out = torch.zeros(action_mask.shape, dtype=torch.float32, device=action_mask.device)
    T = values.shape[1]
    for r, i in enumerate(index):
        n, c0 = int(length[r]), int(first[r])
        if n > T:
            raise FrameError(f"row {r}: response of {n} tokens, but the mrbench batch has T={T}")
        out[r, c0:c0 + n] = values[int(i), :n].to(out)
    return out


def gather_rows(frame: Tensor, action_mask: Tensor, T: int) -> Tensor:
    """The inverse of :func:`scatter_rows` for one experience: ``[b, T]`` response-aligned rows (the
    tests read the advantages OpenRLHF got back with it)."""
    first, length = response_columns(action_mask)
    out = torch.zeros((frame.shape[0], T), dtype=frame.dtype, device=frame.device)
    for r in range(frame.shape[0]):
        n, c0 = int(length[r]), int(first[r])
        out[r, :n] = frame[r, c0:c0 + n]
    return out
