"""Grouped-query matmul attention: equal to sdpa, and the replay under it equal to brute force."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from harness.attention import NAME, SUPPORTED_MODEL_TYPES, grouped_matmul_attention, use_for_rollout
from harness.backends.rollout import sample
from harness.models import chat_prompt_ids, load_model
from harness.replay import ReplayEngine, ReplayJob, full_logits_js


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random", dtype="float32")


def _reference(q, k, v, allowed):
    group = q.shape[1] // k.shape[1]
    out = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                         attn_mask=allowed)
    return out.transpose(1, 2)


@pytest.mark.parametrize("heads,kv_heads,lq,lk,masked", [
    (6, 2, 5, 5, False),   # prefill, causal mask built inside (mask None)
    (6, 2, 3, 8, False),   # queries on top of a cache
    (6, 2, 1, 7, False),   # one decoding step
    (4, 4, 4, 9, True),    # no grouping, additive mask with left padding
    (8, 1, 2, 6, True),    # multi-query
])
def test_equals_sdpa_in_float64(heads, kv_heads, lq, lk, masked):
    g = torch.Generator().manual_seed(heads * 100 + lq * 10 + lk)
    q = torch.randn(2, heads, lq, 16, generator=g, dtype=torch.float64)
    k = torch.randn(2, kv_heads, lk, 16, generator=g, dtype=torch.float64)
    v = torch.randn(2, kv_heads, lk, 16, generator=g, dtype=torch.float64)
    allowed = torch.ones(2, 1, lq, lk, dtype=torch.bool).tril(lk - lq)
    additive = None
    if masked:
        allowed[1, :, :, :2] = False  # the second row is left-padded by two keys
        additive = torch.zeros(2, 1, lq, lk, dtype=torch.float64).masked_fill(~allowed, torch.finfo(torch.float64).min)
    out, weights = grouped_matmul_attention(None, q, k, v, additive)
    assert weights is None and out.shape == (2, lq, heads, 16)
    assert torch.allclose(out, _reference(q, k, v, allowed), atol=1e-12, rtol=0)


def test_bf16_matches_transformers_eager_path():
    """bf16 inputs: the same numbers as transformers' eager attention (bf16 scores, float32 softmax,
    copied KV heads) to within one bf16 rounding of the output, and within bf16 rounding of float64."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(3, 9, 40, 64, generator=g).mul(2).bfloat16(), torch.randn(3, 3, 60, 64, generator=g).bfloat16(),
               torch.randn(3, 3, 60, 64, generator=g).bfloat16())
    allowed = torch.ones(40, 60, dtype=torch.bool).tril(20)
    out, _ = grouped_matmul_attention(None, q, k, v, None)
    assert out.dtype == torch.bfloat16
    kk, vv = k.repeat_interleave(3, 1), v.repeat_interleave(3, 1)
    scores = (torch.matmul(q, kk.transpose(2, 3)) * 0.125).masked_fill(~allowed, torch.finfo(torch.bfloat16).min)
    eager = torch.matmul(torch.softmax(scores, -1, dtype=torch.float32).bfloat16(), vv).transpose(1, 2)
    ulp = 2.0 ** -7 * float(eager.float().abs().max())
    assert float((out.float() - eager.float()).abs().max()) <= ulp
    ref = _reference(q.double(), k.double(), v.double(), allowed)
    assert float((out.double() - ref).abs().mean()) < 2e-3


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_boolean_and_additive_masks_agree(mask_dtype):
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 4, 3, 8, generator=g), torch.randn(2, 2, 7, 8, generator=g), torch.randn(2, 2, 7, 8, generator=g))
    allowed = torch.ones(2, 1, 3, 7, dtype=torch.bool).tril(4)
    allowed[0, :, :, :3] = False
    mask = allowed if mask_dtype == torch.bool else torch.zeros(2, 1, 3, 7).masked_fill(~allowed, float("-inf"))
    out, _ = grouped_matmul_attention(None, q, k, v, mask)
    assert torch.allclose(out, _reference(q, k, v, allowed), atol=1e-6)


@pytest.mark.parametrize("lq,lk,mask_kind", [(12, 12, None), (10, 30, "additive"), (16, 16, "bool")])
def test_float32_blocks_take_the_fused_grouped_kernel(lq, lk, mask_kind):
    """Above DECODE_ROWS query rows float32 runs the fused kernel (no key/value copies): equal to
    the reference; decoding steps stay on the matmuls (covered in float64 above)."""
    from harness.attention import DECODE_ROWS

    assert lq > DECODE_ROWS
    g = torch.Generator().manual_seed(lq + lk)
    q, k, v = (torch.randn(2, h, n, 16, generator=g) for h, n in ((6, lq), (2, lk), (2, lk)))
    allowed = torch.ones(2, 1, lq, lk, dtype=torch.bool).tril(lk - lq)
    allowed[1, :, :, :3] = False if mask_kind else allowed[1, :, :, :3]
    mask = {None: None, "bool": allowed,
            "additive": torch.zeros(2, 1, lq, lk).masked_fill(~allowed, torch.finfo(torch.float32).min)}[mask_kind]
    out, _ = grouped_matmul_attention(None, q, k, v, mask)
    assert torch.allclose(out, _reference(q, k, v, allowed), atol=1e-5, rtol=0)


def test_model_logits_and_greedy_tokens_match_sdpa(tiny):
    model = copy.deepcopy(tiny.model).eval()
    ids = torch.randint(3, 200, (3, 20), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    mask[2, :9] = 0
    prompts = [chat_prompt_ids(tiny.tokenizer, [{"role": "user", "content": t}]) for t in ("hi", "write a poem now")]
    eos = [tiny.tokenizer.eos_token_id]
    with torch.no_grad():
        use_for_rollout(model, "sdpa")
        ref = model(input_ids=ids, attention_mask=mask).logits
        ref_tokens = sample(model, tiny.tokenizer, prompts, eos, max_new_tokens=12, greedy=True)
        assert use_for_rollout(model, "grouped_matmul") == NAME
        out = model(input_ids=ids, attention_mask=mask).logits
        tokens = sample(model, tiny.tokenizer, prompts, eos, max_new_tokens=12, greedy=True)
    valid = mask.bool()
    assert float((out - ref)[valid].abs().max()) <= 1e-5 * float(ref[valid].abs().max())
    assert tokens == ref_tokens


def test_replay_under_grouped_matmul_equals_brute_force(tiny):
    model = copy.deepcopy(tiny.model).eval()
    base = "Write a poem. Rule A: use commas. Rule B: end with 'bye'."
    ctxs = [tuple(chat_prompt_ids(tiny.tokenizer, [{"role": "user", "content": t}]))
            for t in (base, base.replace(" Rule A: use commas.", ""), base.replace(" Rule B: end with 'bye'.", ""))]
    resps = [tuple(torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(n)).tolist()) for n in (3, 11, 25)]
    use_for_rollout(model, "grouped_matmul")
    engine = ReplayEngine(model, batch_size=4, chunk_size=8)
    hidden = engine.run([ReplayJob(c, r) for c in ctxs for r in resps])
    use_for_rollout(model, "sdpa")  # the brute force runs the fused kernel
    worst = 0.0
    for r in resps:
        for c in ctxs[1:]:
            a, b = ReplayJob(ctxs[0], r), ReplayJob(c, r)
            worst = max(worst, float((engine.js(hidden[a], hidden[b]) - full_logits_js(model, a, b)).abs().max()))
    assert worst <= 1e-5


def test_choice_table(tiny):
    model = copy.deepcopy(tiny.model)
    assert model.config.model_type in SUPPORTED_MODEL_TYPES
    before = model.config._attn_implementation
    assert use_for_rollout(model, "default") == before
    assert use_for_rollout(model, "auto") == NAME  # CPU, supported type
    assert use_for_rollout(model, "eager") == "eager"
    model.config.model_type = "gemma2"  # soft-capped attention logits: not supported
    assert use_for_rollout(model, "auto") == "eager"  # unchanged
    with pytest.raises(ValueError, match="supports model types"):
        use_for_rollout(model, "grouped_matmul")


@pytest.mark.parametrize("dtype,choice,rollout,policy_kept", [
    ("bfloat16", "auto", NAME, True),      # a separate CPU rollout copy: grouped matmuls
    ("bfloat16", "sdpa", "sdpa", True),
    ("float32", "auto", NAME, True),       # one copy serves both: the rollout attention while sampling only
    ("float32", "eager", "eager", True),
])
def test_backend_sets_the_rollout_attention(tmp_path, dtype, choice, rollout, policy_kept):

    from toy_task import ToyTask, tiny_config

    from harness.backends.local import LocalBackend

    cfg = tiny_config(str(tmp_path), "mrtpo")
    cfg.model.dtype, cfg.model.train_dtype, cfg.backend.local.rollout_attention = dtype, "float32", choice
    backend = LocalBackend(cfg, task=ToyTask())
    backend._load_policy()
    initial = load_model("tiny-random", dtype="float32").model.config._attn_implementation
    assert backend.rollout_attention_name == rollout and backend.rollout_info()["attention"] == rollout
    with backend._rollout_phase():
        assert backend.rollout_model.config._attn_implementation == rollout
    assert backend.policy.config._attn_implementation == initial  # training keeps its own
    assert backend.rollout_info()["shared_with_training"] == (dtype == "float32")


def test_the_update_attention_is_float32_inside_autocast_with_its_gradient():
    """float32_matmul_attention: bf16 queries, keys and values under bf16 autocast give the float32
    attention of the same (bf16-valued) inputs, to one bf16 rounding of the output, with the
    gradients of the float64 reference to within bf16 rounding."""
    from harness.attention import float32_matmul_attention

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 9, 12, 64, generator=g).mul(3).bfloat16(), torch.randn(2, 3, 20, 64, generator=g).bfloat16(),
               torch.randn(2, 3, 20, 64, generator=g).bfloat16())
    allowed = torch.ones(2, 1, 12, 20, dtype=torch.bool).tril(8)
    allowed[1, :, :, :3] = False
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = float32_matmul_attention(None, *leaves, additive)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 12, 9, 64)
    weights = torch.randn(out.shape, generator=g)
    (out.float() * weights).sum().backward()
    exact = [t.double().requires_grad_() for t in (q, k, v)]
    ref = _reference(*exact, allowed)
    (ref * weights.double()).sum().backward()
    assert (out.double() - ref).abs().max() <= 2 ** -8 * ref.abs().max()
    for leaf, e in zip(leaves, exact):
        assert leaf.grad.dtype == torch.bfloat16
        assert (leaf.grad.double() - e.grad).abs().max() <= 2 ** -7 * e.grad.abs().max()


def test_training_choice_table(tiny):
    from harness.attention import TRAIN_NAME, use_for_training

    model = copy.deepcopy(tiny.model)
    before = model.config._attn_implementation
    assert use_for_training(model, "auto", torch.float32) == before  # a float32 update keeps the model's own
    assert use_for_training(model, "default", torch.bfloat16) == before
    assert use_for_training(model, "auto", torch.bfloat16) == TRAIN_NAME  # CPU, bf16 autocast, supported type
    assert use_for_training(model, "eager", torch.bfloat16) == "eager"
    model.config.model_type = "gemma2"
    assert use_for_training(model, "auto", torch.bfloat16) == "eager"  # unchanged
    with pytest.raises(ValueError, match="supports model types"):
        use_for_training(model, "float32_matmul", torch.bfloat16)


def test_a_local_run_trains_with_the_float32_attention_and_records_it():
    from harness.backends.local import LocalBackend
    from harness.config import RunConfig

    cfg = RunConfig()
    cfg.model.name, cfg.model.train_dtype, cfg.backend.local.threads = "tiny-random", "bfloat16", 1
    backend = LocalBackend(cfg)
    backend._load_policy()
    assert backend.policy.config._attn_implementation == "mrbench_float32_matmul"
    assert backend.update_info()["attention"] == "mrbench_float32_matmul"
    assert backend.update_info()["optimizer"] == "AdamW, fused"
