"""The update's micro-batches of one prompt (harness/backends/loss.py ``_shared_prompt_hidden``,
harness/backends/update.py ``_micro``): the prompt runs once per micro-batch, with the same
log-probabilities and gradient as every row running it (a float64 model; the loss reads its logits in
float32), and fewer FLOPs."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.backends.loss import make_micro_batch, response_logits, response_logprobs
from harness.models import load_model

PROMPT = [5, 6, 7, 8, 9, 10, 11]
RESPONSES = [[40, 41, 42, 43, 44], [45], [46, 47, 48], [49, 50, 51, 52, 53]]


@pytest.fixture(scope="module")
def model64():
    return load_model("tiny-random", dtype="float32").model.double().train()


def _logp_and_grad(model, mb, shared, entropy=False):
    mb = copy.copy(mb)
    mb.shared_prompt = shared
    model.zero_grad()
    logp, ent = response_logprobs(model, mb, temperature=0.9, with_entropy=entropy)
    weights = torch.linspace(-1.0, 2.0, logp.numel(), dtype=logp.dtype).view_as(logp)
    loss = (logp * weights).sum() + (ent.sum() if ent is not None else 0.0)
    loss.backward()
    return logp.detach(), ent, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("responses", [RESPONSES, [[7], [8], [9]], [[40, 41], [42, 43]]])
def test_a_shared_prompt_gives_the_same_logprobs_and_gradient(model64, responses):
    T = max(len(r) for r in responses)
    mb = make_micro_batch([PROMPT] * len(responses), responses, T, 0, torch.device("cpu"))
    assert mb.shared_prompt
    a, ent_a, ga = _logp_and_grad(model64, mb, True, entropy=True)
    b, ent_b, gb = _logp_and_grad(model64, mb, False, entropy=True)
    assert torch.allclose(a, b, atol=1e-12, rtol=0) and torch.allclose(ent_a, ent_b, atol=1e-12, rtol=0)
    assert (a[~mb.response_mask] == 0).all()
    scale = max(float(g.abs().max()) for g in gb)  # the loss reads float32 logits: float32 rounding
    assert scale > 0 and max(float((x - y).abs().max()) for x, y in zip(ga, gb)) <= 1e-5 * scale
    full_a = response_logits(model64, mb)  # the full-distribution path (an algorithm's own loss) shares too
    plain = copy.copy(mb)
    plain.shared_prompt = False
    valid = mb.response_mask
    assert torch.allclose(full_a[valid], response_logits(model64, plain)[valid], atol=1e-5, rtol=0)  # float32 logits


def test_the_prompt_runs_once_per_micro_batch(model64):
    mb = make_micro_batch([PROMPT] * 4, RESPONSES, 5, 0, torch.device("cpu"))
    counts = {}
    for shared in (True, False):
        one = copy.copy(mb)
        one.shared_prompt = shared
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            response_logprobs(model64, one)
        counts[shared] = counter.get_total_flops()
    config = model64.config
    per_position = 2 * sum(m.weight.numel() for m in model64.model.modules() if isinstance(m, torch.nn.Linear))
    # unshared: 4 rows x (7 prompt + 5 response) positions; shared: 7 + 4 x 4 (each response but its last token)
    saved = per_position * (4 * 12 - (7 + 4 * 4))
    assert config.num_hidden_layers and counts[False] - counts[True] >= saved


def test_rows_of_different_prompts_or_a_single_row_do_not_share():
    assert not make_micro_batch([PROMPT, PROMPT[:-1]], RESPONSES[:2], 5, 0, torch.device("cpu")).shared_prompt
    assert not make_micro_batch([PROMPT], RESPONSES[:1], 5, 0, torch.device("cpu")).shared_prompt


def test_gradient_checkpointing_keeps_the_rows_own_prompt_passes():
    model = load_model("tiny-random", dtype="float32").model.train()
    model.gradient_checkpointing_enable()
    mb = make_micro_batch([PROMPT] * 2, RESPONSES[:2], 5, 0, torch.device("cpu"))
    seen = []
    hook = model.model.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    response_logprobs(model, mb)[0].sum().backward()
    hook.remove()
    assert seen == [(2, 12)]  # one pass over both rows' prompts and responses (no cache to share)


def test_micro_batches_hold_one_prompt_each_in_response_length_order():
    from types import SimpleNamespace

    from harness.backends.update import PolicyUpdate

    rollouts = [SimpleNamespace(prompt_ids=[1, 2] if j < 5 else [3], response_ids=[0] * n)
                for j, n in enumerate([4, 2, 9, 2, 1, 3, 3, 8])]
    upd = SimpleNamespace(optim=SimpleNamespace(micro_batch_size=2))
    micro = PolicyUpdate._micro(upd, list(range(8)), rollouts)
    assert micro == [[4, 1], [3, 0], [2], [5, 6], [7]]


def _update_grads(model, micro_batch_size, optim_fields=None):
    """The gradient one PolicyUpdate accumulates over a group of four responses to one prompt."""
    from types import SimpleNamespace

    from harness.backends.update import PolicyUpdate

    fields = dict(lr=1e-3, betas=[0.9, 0.999], weight_decay=0.0, clip_low=0.2, clip_high=0.2, kl_coef=0.0,
                  entropy_coef=0.0, micro_batch_size=micro_batch_size, mini_batches=1, grad_clip=0.0)
    fields.update(optim_fields or {})
    upd = PolicyUpdate(model, SimpleNamespace(**fields), 0.9, 0, torch.device("cpu"))
    rollouts = [SimpleNamespace(prompt_ids=PROMPT, response_ids=r) for r in RESPONSES]
    adv = torch.linspace(-1.0, 1.0, 4 * 5, dtype=torch.float32).view(4, 5)
    seen = []
    hook = model.model.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    from harness.training.step_metrics import UpdateStats

    stats = UpdateStats()
    model.zero_grad(set_to_none=True)
    upd._accumulate(rollouts, [0, 1, 2, 3], adv, None, None, {}, sum(len(r) for r in RESPONSES), stats)
    hook.remove()
    return [p.grad.clone() for p in model.parameters()], seen, stats.loss


def test_a_groups_micro_batches_share_one_prompt_pass_with_the_same_gradient(model64):
    """Micro-batches of 1 and 2 rows of one prompt's group: the prompt runs once for the group (its
    backward once, with the micro-batches' gradients summed), and the gradient and loss are those of
    the whole group in one micro-batch (float64 model; float32 logits)."""
    whole, seen_whole, loss_whole = _update_grads(model64, 4)
    assert seen_whole == [(1, 7), (4, 4)]  # one micro-batch: the prompt, then the rows' responses
    scale = max(float(g.abs().max()) for g in whole)
    for size in (1, 2):
        grads, seen, loss = _update_grads(model64, size)
        assert seen[0] == (1, 7) and all(shape[1] != 7 for shape in seen[1:])  # the prompt ran once
        assert len(seen) == 1 + sum(1 for n in range(0, 4, size) if max(
            len(r) for r in sorted(RESPONSES, key=len)[n:n + size]) > 1)
        assert abs(loss - loss_whole) <= 1e-6 * max(1.0, abs(loss_whole))
        assert max(float((x - y).abs().max()) for x, y in zip(grads, whole)) <= 1e-5 * scale
