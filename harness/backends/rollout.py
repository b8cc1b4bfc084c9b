"""Sampling responses with the model's own forward pass (:func:`harness.backends.decode.decode`,
the passes transformers' ``generate`` makes), keeping the exact sampled token ids.

Each sampled response becomes a :class:`harness.training.batch.Rollout` (the step's data type):
the response ids up to and including the first end-of-turn token (or all ``max_new_tokens`` when
the model never stopped: ``truncated``) and the decoded text the verifiers read. Prompts are
left-padded into one batch; each prompt is repeated G times consecutively, so rollouts
``g*G ... g*G+G-1`` form group ``g``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from harness.backends.decode import decode, logits_warpers, preallocated_cache, preallocated_cache_supported
from harness.models import chat_prompt_ids
from harness.training.batch import Rollout, decode_response
from tasks.base import Example

#: sequences per decoding loop (bounds the KV cache of large steps; the main job fits in one)
GENERATE_BATCH = 64


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, L], attention mask [B, L]) with every row right-aligned."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.tensor(list(r), dtype=torch.long, device=device)
            mask[i, width - len(r):] = 1
    return ids, mask


def cut_at_eos(row: Sequence[int], eos: Sequence[int]) -> tuple[list[int], bool]:
    """The row up to and including its first end-of-turn token; ``truncated`` when there is none."""
    stops = {int(e) for e in eos}
    for i, t in enumerate(row):
        if int(t) in stops:
            return [int(x) for x in row[:i + 1]], False
    return [int(x) for x in row], True


def final_norm(model: Any) -> Any | None:
    """The module whose output is the decoder's final hidden state (``norm`` in Llama-style
    models), or None when the architecture does not expose one."""
    from harness.replay import decoder_and_head

    decoder, _, _ = decoder_and_head(model)
    return getattr(decoder, "norm", None)


@torch.no_grad()
def sample(model: Any, tokenizer: Any, prompts: Sequence[Sequence[int]], eos: Sequence[int], *,
           max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0, top_k: int | None = None,
           greedy: bool = False, batch_size: int | None = None,
           hidden_out: list[torch.Tensor] | None = None,
           logits_out: list[torch.Tensor] | None = None, entropy_out: list[torch.Tensor] | None = None,
           keep_cost: dict[str, float] | None = None, share_prompts: bool = True) -> list[tuple[list[int], bool]]:
    """Generate one response per prompt; returns (response ids, truncated) per prompt, in order.

    ``top_k=None`` disables top-k (transformers would otherwise apply its default of 50);
    ``greedy`` or ``temperature == 0`` decodes greedily. With ``hidden_out`` (a list), a forward
    hook on the final norm records, for each prompt, the hidden states [T, H] that produced the
    next-token distributions of its response tokens (the prefill's last position, then one per
    decoding step), so that the replay need not recompute P_all when it is the sampling prompt.
    Nothing is appended when the model has no final-norm module. With ``logits_out``, a hook on
    the LM head likewise records the logits [T, V] of each response (model dtype; one buffer per
    decoding loop, each response's entry a view of it). With ``entropy_out`` (sampled, not
    greedy), a hook on the LM head computes the entropy [T] (float32) of each sampling distribution
    from the logits it outputs (at ``temperature``, after any soft-cap: the distribution sampled from
    before top-p or top-k), so the entropy costs no pass of its own. ``keep_cost["seconds"]`` (when given)
    accumulates the time spent keeping them: inside the hooks and slicing the results, nothing when
    nothing is kept (the direct cost of keeping, which a benchmark can charge without the noise of
    timing two whole samplings). ``share_prompts``: a prompt repeated in the batch (the G responses
    of a group) is prefilled once (:func:`shared_prefill`).
    """
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else int(eos[0])
    out: list[tuple[list[int], bool]] = []
    step = batch_size or len(prompts)
    for start in range(0, len(prompts), step):
        chunk = prompts[start:start + step]
        ids, mask = left_pad(chunk, pad_id, device)
        sampled = not (greedy or temperature <= 0)
        cache = shared_prefill(model, chunk, ids, mask) if share_prompts else None
        if cache is not None and preallocated_cache_supported(model):
            cache = preallocated_cache(model, ids.shape[1] + max_new_tokens, prefix=cache)
        norm = final_norm(model) if hidden_out is not None else None
        caught: list[torch.Tensor] = []
        logits = _StepBuffer(len(chunk), max_new_tokens) if logits_out is not None else None
        entropy = _StepBuffer(len(chunk), max_new_tokens) if entropy_out is not None and sampled else None
        clock = _Clock(keep_cost)
        hooks = []
        if norm is not None:
            hooks.append(norm.register_forward_hook(
                clock.timed(lambda m, i, o, sink=caught: sink.append(o[:, -1].detach().clone()))))
        if logits is not None:
            from harness.replay import decoder_and_head

            hooks.append(decoder_and_head(model)[1].register_forward_hook(
                clock.timed(lambda m, i, o, sink=logits: sink.add(o[:, -1]))))
        if entropy is not None:
            hooks.append(_entropy_hook(model, entropy, temperature, clock))
        try:
            tokens = decode(model, ids, mask, max_new_tokens=max_new_tokens, eos=eos, pad_id=pad_id, sampled=sampled,
                            warpers=logits_warpers(temperature, top_k, top_p) if sampled else None, cache=cache)
        finally:
            for hook in hooks:
                hook.remove()
        responses = [cut_at_eos(row, eos) for row in tokens.tolist()]
        out.extend(responses)
        if not hooks:
            continue
        clock.start()
        steps = torch.stack(caught, 1) if caught else None
        for i, (resp, _) in enumerate(responses):
            if steps is not None and hidden_out is not None and steps.shape[1] >= len(resp):
                hidden_out.append(steps[i, :len(resp)].clone())
            if logits is not None and logits_out is not None and logits.steps >= len(resp):
                logits_out.append(logits.buffer[i, :len(resp)])  # type: ignore[index]
            if entropy is not None and entropy_out is not None and entropy.steps >= len(resp):
                entropy_out.append(entropy.buffer[i, :len(resp)].clone())  # type: ignore[index]
        clock.stop()
    return out


def shared_prefill(model: Any, rows: Sequence[Sequence[int]], ids: torch.Tensor, mask: torch.Tensor) -> Any | None:
    """The KV cache of every row's prompt but its last token, each distinct prompt computed once
    and repeated for its rows (``ids``/``mask``: the rows left-padded), or None when no prompt
    repeats. The decoding loop then runs only the last prompt token and the response on top of it, so
    a group's prompt goes through the model once instead of G times; the last token's pass, whose
    output predicts the first response token, stays in the loop (and in the hidden-state hooks)."""
    keys = [tuple(r) for r in rows]
    first = {k: i for i, k in reversed(list(enumerate(keys)))}
    if len(first) == len(keys) or min(len(k) for k in keys) < 2:
        return None
    from harness.replay import _returned_cache, decoder_and_head

    order = list(first.values())  # one row per distinct prompt
    slot = {k: n for n, k in enumerate(first)}
    decoder, _, _ = decoder_and_head(model)
    uids, umask = ids[order, :-1], mask[order, :-1]
    positions = (umask.cumsum(-1) - 1).clamp_min(0)
    cache = _returned_cache(decoder(input_ids=uids, attention_mask=umask, position_ids=positions, use_cache=True))
    cache.reorder_cache(torch.tensor([slot[k] for k in keys], device=ids.device))
    return cache


class _Clock:
    """Accumulates wall time into ``sink["seconds"]`` (does nothing without a sink)."""

    def __init__(self, sink: dict[str, float] | None):
        self.sink, self.t0 = sink, 0.0
        if sink is not None:
            sink.setdefault("seconds", 0.0)

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def stop(self) -> None:
        if self.sink is not None:
            self.sink["seconds"] += time.perf_counter() - self.t0

    def timed(self, hook: Any) -> Any:
        if self.sink is None:
            return hook

        def run(*args: Any) -> Any:
            self.start()
            try:
                return hook(*args)
            finally:
                self.stop()
        return run


def _entropy_hook(model: Any, sink: _StepBuffer, temperature: float, clock: _Clock) -> Any:
    """A forward hook on the LM head adding each decoding step's sampling entropies [B] to ``sink``."""
    from algorithms.relevance import token_entropy
    from harness.replay import capped, decoder_and_head, tempered

    _, head, cap = decoder_and_head(model)

    def hook(module: Any, inputs: Any, output: torch.Tensor) -> None:
        sink.add(token_entropy(tempered(capped(output[:, -1].detach(), cap), temperature)))

    return head.register_forward_hook(clock.timed(hook))


class _StepBuffer:
    """[B, max_steps, ...] buffer filled one decoding step at a time (allocated at the first step)."""

    def __init__(self, rows: int, max_steps: int):
        self.rows, self.max_steps, self.steps = rows, max_steps, 0
        self.buffer: torch.Tensor | None = None

    def add(self, step: torch.Tensor) -> None:
        if self.buffer is None:
            self.buffer = step.new_empty((self.rows, self.max_steps, *step.shape[1:]))
        if self.steps < self.max_steps:
            self.buffer[:, self.steps] = step.detach()
        self.steps += 1


def sampling_logits_bytes(model: Any, sequences: int, max_new_tokens: int) -> int:
    """Memory that keeping the sampling logits of ``sequences`` responses would take."""
    from harness.replay import decoder_and_head

    head = decoder_and_head(model)[1]
    return sequences * max_new_tokens * int(head.weight.shape[0]) * head.weight.element_size()


def rollouts_for(model: Any, tokenizer: Any, examples: Sequence[Example], group_size: int, eos: Sequence[int],
                 sampling: Any, max_prompt_tokens: int | None = None, keep_hidden: bool = False,
                 generator: Any = None, seed: int | None = None, logits_budget: int = 0,
                 keep_cost: dict[str, float] | None = None, keep_entropy: bool = False) -> list[Rollout]:
    """G sampled responses for each example (``sampling`` is a :class:`harness.config.SamplingConfig`);
    ``keep_hidden`` stores each response's sampling-time hidden states in ``Rollout.hidden``, and
    also its sampling logits in ``Rollout.logits`` when they take at most ``logits_budget`` bytes.
    With ``generator`` (a :class:`harness.backends.vllm_rollout.VLLMGenerator`) it samples instead
    of the decoding loop, seeded with ``seed``; it records no hidden states (the replay recomputes P_all).
    ``keep_entropy`` stores each response's sampling entropy in ``Rollout.entropy`` (not with
    ``generator``: vLLM returns no entropy, and the replay then computes it). ``keep_cost``: see :func:`sample`."""
    prompts = []
    for ex in examples:
        ids = chat_prompt_ids(tokenizer, ex.messages)
        if max_prompt_tokens and len(ids) > max_prompt_tokens:
            raise ValueError(f"example {ex.id!r}: prompt has {len(ids)} tokens, more than "
                             f"sampling.max_prompt_tokens={max_prompt_tokens}")
        prompts.append(ids)
    hidden: list[torch.Tensor] | None = [] if keep_hidden and generator is None else None
    logits: list[torch.Tensor] | None = None
    if hidden is not None and 0 < sampling_logits_bytes(model, len(prompts) * group_size,
                                                         sampling.max_new_tokens) <= logits_budget:
        logits = []
    entropy: list[torch.Tensor] | None = [] if keep_entropy and generator is None else None
    if generator is not None:
        samples = generator.sample(prompts, group_size, eos, sampling, seed=seed)
    else:
        expanded = [p for p in prompts for _ in range(group_size)]
        samples = sample(model, tokenizer, expanded, eos, max_new_tokens=sampling.max_new_tokens,
                         temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k,
                         hidden_out=hidden, logits_out=logits, entropy_out=entropy, batch_size=GENERATE_BATCH,
                         keep_cost=keep_cost)
    if hidden is not None and len(hidden) != len(samples):
        hidden = None  # the model exposed no final norm: the replay recomputes P_all
    if hidden is None or (logits is not None and len(logits) != len(samples)):
        logits = None
    if entropy is not None and len(entropy) != len(samples):
        entropy = None  # greedy: no sampling distribution
    out = []
    for i, (resp, truncated) in enumerate(samples):
        g = i // group_size
        out.append(Rollout(examples[g], g, prompts[g], resp, decode_response(tokenizer, resp), truncated,
                           hidden=hidden[i] if hidden is not None else None,
                           logits=logits[i] if logits is not None else None,
                           entropy=entropy[i] if entropy is not None else None))
    return out


def greedy_texts(model: Any, tokenizer: Any, messages_list: Sequence[list[dict[str, str]]], eos: Sequence[int],
                 max_new_tokens: int, batch_size: int = 8) -> list[str]:
    """Greedy responses for many chat prompts (evaluation); batches are formed by prompt length."""
    prompts = [chat_prompt_ids(tokenizer, m) for m in messages_list]
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    texts: list[str] = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        res = sample(model, tokenizer, [prompts[i] for i in idx], eos, max_new_tokens=max_new_tokens, greedy=True)
        for i, (resp, _) in zip(idx, res):
            texts[i] = decode_response(tokenizer, resp)
    return texts
