"""The policy-gradient objective of one micro-batch (paper Eq. 3) with optional KL and entropy terms.

For the valid response tokens t of the responses j of an optimiser update (a mini-batch),

    L = -(1 / N) sum_{j,t} min(rho A, clip(rho, 1 - eps_l, 1 + eps_h) A)        (Eq. 3)
        + kl_coef (1 / N) sum_{j,t} k3_t  -  entropy_coef (1 / N) sum_{j,t} H_t,

with N the total number of valid tokens of the mini-batch (not of the micro-batch: summing the
micro-batch losses gives exactly the mini-batch loss, so gradient accumulation is exact),
rho = exp(log pi_theta - log pi_old), k3 = exp(r) - r - 1 with r = log pi_ref - log pi_theta
(the unbiased, non-negative k3 estimator of KL(pi_theta || pi_ref)), and H the entropy of the
policy's next-token distribution. The clip fraction counts tokens where the clipped term is the
active one: (rho > 1 + eps_h and A > 0) or (rho < 1 - eps_l and A < 0).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from harness.replay import decoder_and_head, head_logits, unwrap


@dataclass
class MicroBatch:
    """Left-padded prompts followed by right-padded responses: ids [b, Lp + T]. ``shared_prompt``:
    every row has the same prompt (no padding in it), which the forward pass then runs once."""

    input_ids: Tensor
    attention_mask: Tensor
    response_ids: Tensor  # [b, T]
    response_mask: Tensor  # [b, T] bool
    prompt_width: int
    shared_prompt: bool = False

    @property
    def T(self) -> int:
        return self.response_ids.shape[1]


def make_micro_batch(prompts: list[list[int]], responses: list[list[int]], T: int, pad_id: int,
                     device: torch.device) -> MicroBatch:
    b = len(prompts)
    Lp = max(len(p) for p in prompts)
    ids = torch.full((b, Lp + T), pad_id, dtype=torch.long)
    attn = torch.zeros((b, Lp + T), dtype=torch.long)
    rmask = torch.zeros((b, T), dtype=torch.bool)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        ids[i, Lp - len(p):Lp] = torch.tensor(p, dtype=torch.long)
        attn[i, Lp - len(p):Lp] = 1
        if r:
            ids[i, Lp:Lp + len(r)] = torch.tensor(r, dtype=torch.long)
            attn[i, Lp:Lp + len(r)] = 1
            rmask[i, :len(r)] = True
    shared = b > 1 and Lp > 0 and all(list(p) == list(prompts[0]) for p in prompts)
    return MicroBatch(ids.to(device), attn.to(device), ids[:, Lp:].to(device), rmask.to(device), Lp, shared)


def response_logits(model: Any, mb: MicroBatch, temperature: float = 1.0, prompt: PromptPass | None = None) -> Tensor:
    """float32 logits [b, T, V] at the positions predicting the response tokens (with grad if enabled),
    divided by the rollout ``temperature``: the ratio, the KL and the entropy are taken under the
    distribution the responses were sampled from (as verl and OpenRLHF do).

    Only the response positions go through the LM head. Position ids count real tokens only, so
    left padding does not shift positions (as in generation).
    """
    h, head, cap = _response_hidden(model, mb, prompt)
    return head_logits(head, h, cap, temperature).float()


def _response_hidden(model: Any, mb: MicroBatch, prompt: PromptPass | None = None) -> tuple[Tensor, Any, float | None]:
    """Final hidden states [b, T, H] at the positions predicting the response tokens, the LM head
    and its soft-cap. A prompt every row shares runs once (:func:`_shared_prompt_hidden`); ``prompt``:
    its pass already made, shared with the other micro-batches of its group (:class:`PromptPass`)."""
    decoder, head, cap = decoder_and_head(model)
    if prompt is not None:
        return _shared_prompt_hidden(decoder, mb, prompt), head, cap
    if mb.shared_prompt and not getattr(unwrap(model), "is_gradient_checkpointing", False):
        return _shared_prompt_hidden(decoder, mb), head, cap
    pos = (mb.attention_mask.cumsum(-1) - 1).clamp_min(0)
    hidden = decoder(input_ids=mb.input_ids, attention_mask=mb.attention_mask, position_ids=pos).last_hidden_state
    return hidden[:, mb.prompt_width - 1:mb.prompt_width - 1 + mb.T], head, cap


class PromptPass:
    """One prompt's pass through the decoder: its keys and values per layer and the hidden state of its
    last position (which predicts the first response token).

    ``detached``: the micro-batches of the prompt's group run on detached copies (the keys, values
    and hidden state as leaves), so each micro-batch's backward stops there and their gradients add
    up; :meth:`backward` then runs the prompt's own backward once with the sum. The gradient is the
    one each micro-batch running the prompt would give (rounding aside), with the prompt's forward
    and backward once per group instead of once per micro-batch. Not detached, the micro-batch's
    own backward runs through the prompt (one micro-batch per group)."""

    def __init__(self, decoder: Any, prompt_ids: Tensor, detached: bool = False):
        out = decoder(input_ids=prompt_ids, use_cache=True)
        self.cache = out.past_key_values
        self._ends = [out.last_hidden_state[:, -1:]] + [t for layer in self.cache.layers
                                                       for t in (layer.keys, layer.values)]
        self._leaves = ([t.detach().requires_grad_(t.requires_grad) for t in self._ends] if detached
                        else list(self._ends))
        self.width = prompt_ids.shape[1]

    @property
    def last(self) -> Tensor:
        return self._leaves[0]

    def expanded_cache(self, b: int) -> Any:
        """A cache of the prompt's keys and values expanded to ``b`` rows (views, no copies), for one
        micro-batch's decoder call to extend."""
        cache = copy.copy(self.cache)
        cache.layers = [copy.copy(layer) for layer in self.cache.layers]
        for i, layer in enumerate(cache.layers):
            keys, values = self._leaves[1 + 2 * i], self._leaves[2 + 2 * i]
            layer.keys, layer.values = keys.expand(b, -1, -1, -1), values.expand(b, -1, -1, -1)
        return cache

    def backward(self) -> None:
        """The prompt's backward with the gradients its micro-batches left on the detached leaves."""
        pairs = [(end, leaf.grad) for end, leaf in zip(self._ends, self._leaves)
                 if end is not leaf and end.requires_grad and leaf.grad is not None]
        if pairs:
            torch.autograd.backward([end for end, _ in pairs], [grad for _, grad in pairs])


def _shared_prompt_hidden(decoder: Any, mb: MicroBatch, prompt: PromptPass | None = None) -> Tensor:
    """The hidden states of :func:`_response_hidden` when every row has the same prompt: the prompt
    runs through the decoder once (or ``prompt`` holds that pass), its keys and values are expanded
    to the ``b`` rows, and each row runs only its response but the last token on top of them (its
    last output predicts nothing the loss reads). The gradient reaches the prompt's pass through the
    expanded keys and values, summed over the rows, as it sums over the rows' own prompt passes
    otherwise: the same loss and gradient with the prompt's FLOPs once instead of ``b`` times
    (rounding aside)."""
    b, lp, T = mb.input_ids.shape[0], mb.prompt_width, mb.T
    if prompt is None:
        prompt = PromptPass(decoder, mb.input_ids[:1, :lp])
    elif prompt.width != lp:
        raise ValueError(f"the micro-batch's prompt has {lp} tokens, the shared prompt pass {prompt.width}")
    first = prompt.last.expand(b, 1, -1)  # predicts each row's first response token
    if T == 1:
        return first
    cache = prompt.expanded_cache(b)
    pos = torch.arange(lp, lp + T - 1, device=mb.input_ids.device).expand(b, -1)
    rest = decoder(input_ids=mb.input_ids[:, lp:lp + T - 1], attention_mask=mb.attention_mask[:, :lp + T - 1],
                   position_ids=pos, past_key_values=cache, use_cache=True).last_hidden_state
    return torch.cat([first, rest], dim=1)


def response_logprobs(model: Any, mb: MicroBatch, temperature: float = 1.0, with_entropy: bool = False,
                      prompt: PromptPass | None = None) -> tuple[Tensor, Tensor | None]:
    """(log pi(y_t) [b, T], entropy [b, T] or None) at the rollout ``temperature``, 0 off the response
    mask, with grad if enabled. The same values as :func:`gather_logprobs` and :func:`entropy` on
    :func:`response_logits`, but the LM head and the log-softmax run only at the valid response
    tokens (the loss reads nothing else), and no [b, T, V] log-softmax is kept: log p = logit -
    logsumexp(logits). ``prompt``: the prompt's pass shared with its group's other micro-batches."""
    h, head, cap = _response_hidden(model, mb, prompt)
    mask = mb.response_mask
    logits = head_logits(head, h[mask], cap, temperature).float()  # [N, V], N valid tokens
    lse = torch.logsumexp(logits, -1)
    logp = torch.zeros(mask.shape, dtype=logits.dtype, device=logits.device)
    logp = logp.masked_scatter(mask, logits.gather(-1, mb.response_ids[mask].unsqueeze(-1)).squeeze(-1) - lse)
    ent = None
    if with_entropy:
        values = lse - (torch.softmax(logits, -1) * logits).sum(-1)
        ent = torch.zeros(mask.shape, dtype=logits.dtype, device=logits.device).masked_scatter(mask, values)
    return logp, ent


def gather_logprobs(logits: Tensor, tokens: Tensor) -> Tensor:
    return torch.log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def entropy(logits: Tensor) -> Tensor:
    logp = torch.log_softmax(logits, -1)
    return -(logp.exp() * logp).sum(-1)


@dataclass
class LossTerms:
    loss: Tensor
    clipped: int
    kl_sum: float
    entropy_sum: float
    ratio_max: float


def surrogate_loss(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, n_total: float, clip_low: float,
                   clip_high: float, ref_logp: Tensor | None = None, kl_coef: float = 0.0,
                   token_entropy: Tensor | None = None, entropy_coef: float = 0.0) -> LossTerms:
    """Eq. 3 (+ k3 KL, - entropy) for one micro-batch, normalised by the mini-batch token count
    ``n_total`` (a float where data-parallel ranks share an update: their mean token count)."""
    m = mask.to(logp.dtype)
    n = max(float(n_total), 1.0)
    ratio = torch.exp(logp - old_logp)
    clipped_ratio = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    terms = torch.minimum(ratio * adv, clipped_ratio * adv)
    loss = -(terms * m).sum() / n
    active = ((ratio > 1.0 + clip_high) & (adv > 0)) | ((ratio < 1.0 - clip_low) & (adv < 0))
    kl_sum = 0.0
    if ref_logp is not None:
        r = ref_logp - logp
        k3 = torch.exp(r) - r - 1.0
        kl_sum = float((k3 * m).sum().detach())
        if kl_coef:
            loss = loss + kl_coef * (k3 * m).sum() / n
    ent_sum = 0.0
    if token_entropy is not None:
        ent_sum = float((token_entropy * m).sum().detach())
        if entropy_coef:
            loss = loss - entropy_coef * (token_entropy * m).sum() / n
    ratio_max = float(ratio[mask].max().detach()) if bool(mask.any()) else 1.0
    return LossTerms(loss, int((active & mask).sum()), kl_sum, ent_sum, ratio_max)


@dataclass(frozen=True)
class PolicyObjective:
    """The update's objective as both backends run it: :func:`surrogate_loss` with the run's clip
    range and KL and entropy coefficients (``optim.*``). The local backend's
    :class:`~harness.backends.update.PolicyUpdate` calls it on each micro-batch; on the openrlhf
    backend each DeepSpeed policy actor calls it in place of OpenRLHF's PPO loss
    (:mod:`harness.backends.openrlhf.update`)."""

    clip_low: float
    clip_high: float
    kl_coef: float = 0.0
    entropy_coef: float = 0.0

    @classmethod
    def from_optim(cls, optim: Any) -> PolicyObjective:
        return cls(float(optim.clip_low), float(optim.clip_high), float(optim.kl_coef), float(optim.entropy_coef))

    @property
    def needs_reference(self) -> bool:
        """Whether the loss reads the reference policy's log-probabilities (the k3 KL term)."""
        return self.kl_coef > 0

    @property
    def needs_entropy(self) -> bool:
        return bool(self.entropy_coef)

    def __call__(self, logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, n_total: float,
                 ref_logp: Tensor | None = None, token_entropy: Tensor | None = None) -> LossTerms:
        return surrogate_loss(logp, old_logp, adv, mask, n_total, self.clip_low, self.clip_high, ref_logp,
                              self.kl_coef, token_entropy, self.entropy_coef)
