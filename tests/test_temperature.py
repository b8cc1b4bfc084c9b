"""Log-probabilities, the ratio and the relevance are taken at the rollout temperature: the
distributions compared are the ones the responses were sampled from (verl and OpenRLHF divide the
logits by the rollout temperature before their log-probabilities)."""

from __future__ import annotations

import pytest
import torch
from toy_task import tiny_config, train_run

from algorithms.relevance import js_distance
from harness.backends import update
from harness.backends.loss import make_micro_batch, response_logits
from harness.models import load_model
from harness.replay import ReplayEngine, ReplayJob, decoder_and_head, full_context_hidden, head_logits


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return load_model("tiny-random", dtype="float32")


def _job(tok, text: str, response: list[int]) -> ReplayJob:
    return ReplayJob(tuple(tok.encode(text, add_special_tokens=False)), tuple(response))


@pytest.mark.parametrize("temperature", [0.7, 1.1, 2.0])
@torch.inference_mode()
def test_replay_statistics_at_the_rollout_temperature(tiny, temperature):
    tok, model = tiny.tokenizer, tiny.model
    response = list(range(40, 52))
    a, b = _job(tok, "Say hi. Use a letter.", response), _job(tok, "Say hi.", response)
    engine = ReplayEngine(model, temperature=temperature)
    hidden = engine.run([a, b])
    _, head, cap = decoder_and_head(model)
    la = head(full_context_hidden(model, a)).float() / temperature
    lb = head(full_context_hidden(model, b)).float() / temperature
    assert torch.allclose(engine.js(hidden[a], hidden[b]), js_distance(la, lb), atol=1e-5)
    expected_lp = torch.log_softmax(la, -1).gather(-1, torch.tensor(response).unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(engine.logprobs(hidden[a], response), expected_lp, atol=1e-5)
    plain = ReplayEngine(model)
    assert not torch.allclose(plain.js(plain.run([a])[a], plain.run([b])[b]), engine.js(hidden[a], hidden[b]))
    assert torch.equal(head_logits(head, hidden[a], cap), head(hidden[a]))  # temperature 1 leaves them alone


def test_training_logits_are_divided_by_the_temperature(tiny):
    mb = make_micro_batch([[5, 6, 7]], [[8, 9, 10, 11]], 4, 0, torch.device("cpu"))
    with torch.no_grad():
        assert torch.allclose(response_logits(tiny.model, mb, 1.1), response_logits(tiny.model, mb) / 1.1, atol=1e-6)


def test_the_backend_uses_the_rollout_temperature_everywhere(tmp_path, monkeypatch):
    seen: list[float] = []
    for name in ("response_logits", "response_logprobs"):  # full distributions, or at the valid tokens only
        real = getattr(update, name)

        def spy(model, mb, temperature=1.0, *args, real=real, **kwargs):
            seen.append(temperature)
            return real(model, mb, temperature, *args, **kwargs)

        monkeypatch.setattr(update, name, spy)
    engines: list[float] = []
    real_init = ReplayEngine.__init__

    def spy_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        engines.append(self.temperature)

    monkeypatch.setattr(ReplayEngine, "__init__", spy_init)
    cfg = tiny_config(str(tmp_path / "r"), "mrtpo", steps=1, optim__mini_batches=2)
    cfg.sampling.temperature = 1.3
    train_run(cfg)
    assert seen and set(seen) == {1.3} and engines == [1.3]


def test_float32_replay_head_on_bf16_hidden_states(tiny):
    """``head_float32``: the statistics' logits come from a float32 copy of the LM head on the
    upcast hidden states (no bf16 output rounding), refreshed when the weights change."""
    import copy

    model = copy.deepcopy(tiny.model).to(torch.bfloat16).eval()
    _, head, _ = decoder_and_head(model)
    engine = ReplayEngine(model, head_float32=True)
    h = torch.randn(5, head.weight.shape[1], dtype=torch.bfloat16)
    with torch.inference_mode():
        logits = engine._logits(head, h, None)
        assert logits.dtype == torch.float32
        assert torch.allclose(logits, h.float() @ head.weight.float().T, atol=1e-4)
        assert torch.equal(engine.js(h, h), torch.zeros(5))
        head.weight.mul_(2)
        engine.refresh()
        assert torch.allclose(engine._logits(head, h, None), 2 * logits, atol=1e-3)
