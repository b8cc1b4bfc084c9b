"""``model.train_dtype``: bf16 mixed precision for the update where the host computes bf16 natively
(the rollout's probe), float32 elsewhere; float32 master weights and optimiser state either way."""

from __future__ import annotations

import copy

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from algorithms import get_algorithm
from harness import models, system
from harness.backends.local import LocalBackend
from harness.backends.update import PolicyUpdate
from harness.config import OptimConfig, RunConfig
from harness.models import ModelError, load_model, resolve_train_dtype
from harness.training.batch import Rollout
from tasks.base import Example

pytestmark = pytest.mark.usefixtures("one_torch_thread")
CPU = torch.device("cpu")


@pytest.mark.parametrize("native", [True, False])
def test_auto_picks_bf16_compute_only_on_native_bf16_hosts(monkeypatch, native):
    monkeypatch.setattr(models, "bf16_supported", lambda device: native)
    expected = torch.bfloat16 if native else torch.float32
    assert resolve_train_dtype("auto", CPU) == expected
    assert system.native_bf16() is native  # the probe the rollout and the record report
    cfg = RunConfig()
    cfg.model.name, cfg.backend.local.threads = "tiny-random", 1
    backend = LocalBackend(cfg)
    assert backend.train_dtype == expected and backend.rollout_dtype == expected  # one probe for both
    info = backend.update_info()
    assert info == {"train_dtype": "auto", "compute_dtype": str(expected).removeprefix("torch."),
                    "master_dtype": "float32", "host_native_bf16": native,
                    "attention": None, "optimizer": "AdamW"}  # before the policy loads (no update yet)
    assert resolve_train_dtype("float32", CPU) == torch.float32  # always available
    assert resolve_train_dtype("bfloat16", CPU) == torch.bfloat16
    with pytest.raises(ModelError, match="train_dtype.*known: auto, float32, bfloat16"):
        resolve_train_dtype("float16", CPU)


def _batch():
    ex = Example(id="e", messages=[{"role": "user", "content": "hi"}], reward_names=["a"])
    rollouts = [Rollout(ex, 0, [5, 6, 7, 8], list(range(40 + 3 * i, 50 + 3 * i)), "", False) for i in range(4)]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5]).unsqueeze(1).expand(4, 10).contiguous()
    return rollouts, adv


def _surrogate(update: PolicyUpdate, rollouts, adv, old: dict[int, torch.Tensor] | None = None):
    """-(1/N) sum rho A in float32 against ``old`` (the log-probabilities before the update)."""
    update.compute_dtype, kept = torch.float32, update.compute_dtype
    lp = update._old_logprobs(rollouts, list(range(len(rollouts))))
    update.compute_dtype = kept
    if old is None:
        return lp
    mask = torch.ones(4, 10)
    ratio = torch.exp(torch.stack([lp[j] for j in range(4)]) - torch.stack([old[j] for j in range(4)]))
    return float(-(ratio * adv * mask).sum() / mask.sum())


def test_one_bf16_update_moves_the_loss_as_the_float32_one_does():
    base = load_model("tiny-random", dtype="float32").model
    rollouts, adv = _batch()
    optim = OptimConfig(lr=1e-3, micro_batch_size=2)
    moved, deltas = {}, {}
    for dtype in (torch.float32, torch.bfloat16):
        model = copy.deepcopy(base)
        update = PolicyUpdate(model, optim, 1.0, 0, CPU, compute_dtype=dtype)
        seen: list[torch.dtype] = []
        hook = model.lm_head.register_forward_hook(lambda m, i, out, seen=seen: seen.append(out.dtype))
        old = _surrogate(update, rollouts, adv)
        before = _surrogate(update, rollouts, adv, old)
        seen.clear()
        update(rollouts, adv, 10, get_algorithm("grpo"))
        hook.remove()
        assert set(seen) == {dtype}  # the update computed in its dtype
        assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights
        assert all(v.dtype == torch.float32 for s in update.optimizer.state.values() for v in s.values()
                   if v.dim())  # optimiser state
        moved[dtype] = _surrogate(update, rollouts, adv, old) - before
        deltas[dtype] = torch.cat([(p.detach() - q).flatten() for p, q in zip(model.parameters(), base.parameters())])
    assert moved[torch.float32] < 0 and moved[torch.bfloat16] < 0  # both steps lower the surrogate loss
    assert moved[torch.bfloat16] == pytest.approx(moved[torch.float32], rel=0.5)
    cosine = torch.nn.functional.cosine_similarity(deltas[torch.float32], deltas[torch.bfloat16], dim=0)
    assert cosine > 0.8, cosine


def _fake_records(root, rewards_by_arm, kl_by_arm):
    import json

    for arm, per_seed in rewards_by_arm.items():
        for seed, curve in enumerate(per_seed):
            d = root / arm / f"seed{seed}"
            d.mkdir(parents=True)
            (d / "config.json").write_text(json.dumps({"seed": seed, "model": {"train_dtype": arm}}))
            (d / "provenance.json").write_text(json.dumps({"status": "finished", "update": {"compute_dtype": arm}}))
            rows = [{"step": n + 1, "reward_mean": r, "kl": kl_by_arm[arm][seed] * (n + 1) / len(curve),
                     "time_update": 1.0} for n, r in enumerate(curve)]
            (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(("shift", "verdict"), [(0.0, "agree yes"), (0.3, "agree no")])
def test_the_agreement_report_compares_the_arms_against_seed_noise(tmp_path, monkeypatch, capsys, shift, verdict):
    import importlib.util
    import sys
    from pathlib import Path

    curves = [[0.40, 0.45, 0.50], [0.42, 0.44, 0.47], [0.38, 0.46, 0.52]]
    _fake_records(tmp_path, {"bfloat16": [[r + shift for r in c] for c in curves], "float32": curves[::-1]},
                  {"bfloat16": [1e-3, 2e-3, 1.5e-3], "float32": [1.2e-3, 1.8e-3, 1.4e-3]})
    path = Path(__file__).resolve().parent.parent / "bench" / "train_dtype_agreement.py"
    spec = importlib.util.spec_from_file_location("train_dtype_agreement", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", ["x", "--root", str(tmp_path)])
    assert module.main() == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == verdict
    assert "bfloat16: seeds [0, 1, 2]; float32: seeds [0, 1, 2]; 3 steps" in out
