"""The local sampler's decoding loop (harness/backends/decode.py) and what it runs on: the same
tokens, hidden states and logits as transformers' ``generate`` where the draw is the same, the
preallocated cache's attention equal to attention over the filled keys alone, the packed bf16 linear
layers equal to ``linear``, and the two-level draw's distribution."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.attention import grouped_matmul_attention, use_for_rollout
from harness.backends import decode, rollout
from harness.models import cast_weights, load_model
from harness.packed_linear import pack_linears, packing_available, unpack_linears

PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random", dtype="float32")


def _rollout_copy(tiny, dtype):
    model = cast_weights(copy.deepcopy(tiny.model), dtype).eval().requires_grad_(False)
    use_for_rollout(model, "auto")
    return model


def _multinomial(probs):
    """generate's draw: one exponential variate per entry (torch.multinomial's single-sample path)."""
    return torch.multinomial(probs, 1).squeeze(1)


def _generate(model, rows, eos, pad, max_new_tokens, greedy, temperature=1.0, top_k=None, top_p=1.0):
    """transformers' generate on the same batch and shared prefill as rollout.sample (the reference)."""
    ids, mask = rollout.left_pad(rows, pad, torch.device("cpu"))
    kwargs = ({"do_sample": False, "temperature": None, "top_p": None, "top_k": None} if greedy else
              {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": top_k or 0})
    cache = rollout.shared_prefill(model, rows, ids, mask)
    seqs = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, pad_token_id=pad,
                          eos_token_id=list(eos), past_key_values=cache, **kwargs)
    return [rollout.cut_at_eos(r, eos) for r in seqs[:, ids.shape[1]:].tolist()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", ["greedy", "sampled", "warped"])
def test_the_loop_draws_what_generate_draws_with_generates_draw(tiny, monkeypatch, dtype, mode):
    """With torch.multinomial as the draw, for a seed the loop's tokens are generate's (greedy; sampled
    at temperature 1; at temperature 0.7 with top-k 20 and top-p 0.9): the loop's arithmetic (forward
    passes, cache, packed linears, logits, processors) is generate's."""
    if dtype == torch.bfloat16 and not packing_available():
        pytest.skip("this torch has no oneDNN bf16 packed linear")
    monkeypatch.setattr(decode, "draw", _multinomial)
    model = _rollout_copy(tiny, dtype)
    assert pack_linears(model) == (0 if dtype == torch.float32 else 2 * 7 + 1)
    rows = [p for p in PROMPTS for _ in range(4)]
    eos, pad = [tiny.tokenizer.eos_token_id], tiny.tokenizer.pad_token_id
    settings = {"temperature": 0.7, "top_k": 20, "top_p": 0.9} if mode == "warped" else {"temperature": 1.0}
    torch.manual_seed(11)
    ours = rollout.sample(model, tiny.tokenizer, rows, eos, max_new_tokens=40, greedy=mode == "greedy", **settings)
    torch.manual_seed(11)
    theirs = _generate(model, rows, eos, pad, 40, mode == "greedy", **settings)
    assert ours == theirs
    assert len({len(r) for r, _ in ours}) > 1  # lengths vary: finished rows continue with padding


def test_hidden_states_and_logits_are_generates(tiny, monkeypatch):
    """The kept sampling pass (what the replay reuses as P_all) is bit for bit the one generate makes."""
    model = _rollout_copy(tiny, torch.bfloat16)
    pack_linears(model)
    monkeypatch.setattr(decode, "draw", _multinomial)
    rows = [p for p in PROMPTS for _ in range(3)]
    kept = {}
    for name in ("ours", "generate"):
        hidden, logits = [], []
        norm, head = model.model.norm, model.lm_head
        hooks = [norm.register_forward_hook(lambda m, i, o, s=hidden: s.append(o[:, -1].clone())),
                 head.register_forward_hook(lambda m, i, o, s=logits: s.append(o[:, -1].clone()))]
        eos = [tiny.tokenizer.eos_token_id]
        torch.manual_seed(5)
        if name == "ours":
            out = rollout.sample(model, tiny.tokenizer, rows, eos, max_new_tokens=9, temperature=1.0)
        else:
            out = _generate(model, rows, eos, tiny.tokenizer.pad_token_id, 9, greedy=False)
        for h in hooks:
            h.remove()
        kept[name] = out, hidden, logits
    (a, ha, la), (b, hb, lb) = kept["ours"], kept["generate"]
    assert a == b
    n = min(len(ha), len(hb))  # the shared prefill's pass, then one per token (generate may run one more)
    assert n >= max(len(r) for r, _ in a) and all(torch.equal(x, y) for x, y in zip(ha[:n], hb[:n]))
    assert all(torch.equal(x, y) for x, y in zip(la[:n], lb[:n]))


@pytest.mark.parametrize("threads", [1, 2])
def test_attention_over_a_preallocated_buffer_equals_attention_over_its_filled_keys(threads):
    """The buffer's unfilled positions (zeros past the mask's width) change no output bit."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(threads)
        b, heads, kv_heads, d = 3, 6, 2, 16
        for filled in (1, 2, 7, 31, 32, 33, 64, 70):
            capacity = -(-filled // decode.CACHE_GROWTH) * decode.CACHE_GROWTH + 32
            q = torch.randn(b, heads, 1, d, generator=g).bfloat16()
            k = torch.zeros(b, kv_heads, capacity, d, dtype=torch.bfloat16)
            v = torch.zeros_like(k)
            k[:, :, :filled] = torch.randn(b, kv_heads, filled, d, generator=g).bfloat16()
            v[:, :, :filled] = torch.randn(b, kv_heads, filled, d, generator=g).bfloat16()
            mask = torch.zeros(b, 1, 1, filled, dtype=torch.bfloat16)
            mask[0, :, :, :min(3, filled - 1)] = torch.finfo(torch.bfloat16).min  # left padding in row 0
            exact, _ = grouped_matmul_attention(None, q, k[:, :, :filled].contiguous(), v[:, :, :filled].contiguous(),
                                                mask)
            buffered, _ = grouped_matmul_attention(None, q, k, v, mask)
            assert torch.equal(exact, buffered), filled
    finally:
        torch.set_num_threads(before)


def test_the_preallocated_cache_grows_and_refuses_past_its_limit(tiny):
    model = _rollout_copy(tiny, torch.bfloat16)
    cache = decode.preallocated_cache(model, 40)
    layer = cache.layers[0]
    k = torch.randn(2, 2, 30, 16).bfloat16()
    keys, values = layer.update(k, k + 1)
    assert keys.shape[2] == decode.CACHE_GROWTH and layer.get_seq_length() == 30 and torch.equal(values[:, :, :30], k + 1)
    keys, _ = layer.update(k[:, :, :5], k[:, :, :5])
    assert keys.shape[2] == 40 and torch.equal(keys[:, :, :30], k) and torch.equal(keys[:, :, 30:35], k[:, :, :5])
    assert not keys[:, :, 35:].any()
    with pytest.raises(RuntimeError, match="decoding cache full"):
        layer.update(k[:, :, :6], k[:, :, :6])
    assert decode.preallocated_cache_supported(model)
    plain = copy.deepcopy(model)
    plain.set_attn_implementation("sdpa")
    assert not decode.preallocated_cache_supported(plain)  # the fused kernel would read the whole buffer


def test_packed_linear_equals_linear_and_follows_weight_updates():
    if not packing_available():
        pytest.skip("this torch has no oneDNN bf16 packed linear")
    g = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(40, 24, bias=True).bfloat16().requires_grad_(False)
    trained = torch.nn.Linear(40, 24, bias=True).bfloat16()  # trainable: left as it is
    model = torch.nn.ModuleList([layer, trained])
    assert pack_linears(model) == 1 and "forward" not in trained.__dict__
    for rows in (1, 16, 100):
        x = torch.randn(rows, 40, generator=g).bfloat16()
        assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    with torch.no_grad():
        layer.load_state_dict({"weight": torch.randn(24, 40, generator=g).bfloat16(), "bias": layer.bias})
    x = torch.randn(3, 5, 40, generator=g).bfloat16()
    assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))  # reordered again
    with FlopCounterMode(display=False) as counter:
        layer(x)
    assert counter.get_total_flops() == 2 * 15 * 40 * 24
    unpack_linears(model)
    assert "forward" not in layer.__dict__


def test_a_packed_model_deep_copies_and_its_copy_packs_its_own_weight():
    """oneDNN's blocked weight has no storage to copy: a deep copy of a used packed model
    (bench/replay_int8_agreement.py copies the rollout copy) gets none and reorders at its first call."""
    import copy

    if not packing_available():
        pytest.skip("this torch has no oneDNN bf16 packed linear")
    g = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 16).bfloat16().requires_grad_(False))
    assert pack_linears(model) == 1
    x = torch.randn(4, 32, generator=g).bfloat16()
    expected = model(x)  # the original now holds a reordered weight
    twin = copy.deepcopy(model)
    with torch.no_grad():
        twin[0].weight.mul_(2)
    assert torch.equal(twin(x), torch.nn.functional.linear(x, twin[0].weight, twin[0].bias))
    assert torch.equal(model(x), expected)  # the original's weight and packed copy untouched


def test_the_draw_samples_each_entry_in_proportion_and_never_a_zero():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    v = 700  # not a multiple of the block: padded
    p = torch.softmax(torch.randn(v, generator=g) * 2, 0)
    p[[0, 255, 256, 699]] = 0.0  # zeros at block edges and the row's end
    p /= p.sum()
    n, rows = 400_000, 2000
    counts = torch.zeros(v, dtype=torch.float64)
    for _ in range(n // rows):
        counts += torch.bincount(decode.draw(p.expand(rows, -1).contiguous()), minlength=v).double()
    assert counts[[0, 255, 256, 699]].sum() == 0
    live = p > 0
    expected = p.double()[live] * n
    chi2 = float(((counts[live] - expected) ** 2 / expected).sum())
    df = int(live.sum()) - 1
    assert chi2 < df + 5 * (2 * df) ** 0.5  # about 5 standard deviations of the chi-square
    one = torch.zeros(3, 513)
    one[0, 512], one[1, 0], one[2, 300] = 1.0, 1.0, 1.0  # all mass on one entry, wherever it is
    assert decode.draw(one).tolist() == [512, 0, 300]


def _qwen2_tiny():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True)
    torch.manual_seed(4)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:  # biases on the query, key and value projections
            layer.self_attn.q_proj.bias.normal_()
            layer.self_attn.k_proj.bias.normal_()
    return model


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_the_decoding_step_is_the_models_forward_bit_for_bit(tiny, family):
    """The fewer-operations pass (harness/backends/decode_step.py) gives the model's logits and final
    hidden states, and writes the same keys and values, over a left-padded batch with a cache."""
    from harness.backends.decode_step import DecodeStep

    base = tiny.model if family == "llama" else _qwen2_tiny()
    model = cast_weights(copy.deepcopy(base), torch.bfloat16).eval().requires_grad_(False)
    use_for_rollout(model, "auto")
    assert not DecodeStep.supports(model)  # its linear layers are not packed yet
    pack_linears(model)
    assert DecodeStep.supports(model) and decode.decode_step_for(model) is decode.decode_step_for(model)
    rows = [p for p in PROMPTS for _ in range(2)]
    ids, mask = rollout.left_pad(rows, 0, torch.device("cpu"))
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    caches = [decode.preallocated_cache(model, ids.shape[1] + 4) for _ in range(2)]
    step = decode.decode_step_for(model)
    with torch.no_grad():
        for cache in caches:
            model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :-1], past_key_values=cache)
        hidden = []
        hook = model.model.norm.register_forward_hook(lambda m, i, o: hidden.append(o.clone()))
        token, attention, p = ids[:, -1:], mask, pos[:, -1:]
        for _ in range(3):
            ours = step(token, attention, p, caches[0])
            theirs = model(input_ids=token, attention_mask=attention, position_ids=p, past_key_values=caches[1],
                           logits_to_keep=1).logits
            assert torch.equal(ours, theirs) and torch.equal(hidden[-2], hidden[-1])
            token, p = ours[:, -1].argmax(-1, keepdim=True), p + 1
            attention = torch.cat([attention, attention.new_ones((len(rows), 1))], dim=-1)
        hook.remove()
    for a, b in zip(caches[0].layers, caches[1].layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    twin = copy.deepcopy(model)  # a used step does not travel with a copy; the copy builds its own
    assert decode.decode_step_for(twin) is not step and decode.decode_step_for(twin).model is twin
    model.train()
    assert not DecodeStep.supports(model)
