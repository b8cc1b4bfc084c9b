"""A step in which no reward varies within any group has no gradient: its update skips the backward
passes and the optimiser step (AdamW would still move the weights through momentum and weight
decay), and its metrics row says so (``update_skipped``, loss and gradient norm 0). A KL term keeps
the update."""

from __future__ import annotations

import pytest
import torch
import toy_task
from toy_task import ToyTask, tiny_config, train_run
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from tasks.base import Verdict

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Constant(ToyTask):
    """Every reward 1 for every response: no group ever has a signal."""

    def score(self, example, response):
        return [Verdict(v.reward, 1.0, v.reason, v.block, spans=v.spans) for v in super().score(example, response)]


@pytest.fixture(autouse=True)
def _toy():
    toy_task.register()


def test_a_step_without_signal_runs_no_backward_and_no_optimiser_step(tmp_path, monkeypatch):
    from harness.backends import update

    def no_backward(*args, **kwargs):
        raise AssertionError("a step without signal ran a backward pass")

    monkeypatch.setattr(update.PolicyUpdate, "_accumulate", no_backward)
    monkeypatch.setattr(torch.optim.AdamW, "step", no_backward)
    cfg = tiny_config(str(tmp_path / "rec"), steps=2, optim__weight_decay=0.1)
    backend, rec, summary = train_run(cfg, task=Constant())
    rows = rec.metrics()
    assert [r["update_skipped"] for r in rows] == [1, 1]
    assert all(r["loss"] == 0 and r["grad_norm"] == 0 and r["adv_nonzero_tokens"] == 0 for r in rows)
    assert all(r["frac_groups_no_signal"] == 1 for r in rows)
    from harness.models import load_model

    initial = load_model("tiny-random").model.state_dict()
    after = backend.policy.state_dict()
    assert all(torch.equal(initial[k], after[k].to(initial[k].dtype)) for k in initial)


def test_a_step_with_signal_or_a_kl_term_updates(tmp_path, trained):
    rows = trained("mrtpo", steps=2).record.metrics()  # tiny_config's default algorithm
    assert all(r["update_skipped"] == 0 for r in rows if r["adv_nonzero_tokens"] > 0)
    assert any(r["adv_nonzero_tokens"] > 0 for r in rows)
    _, rec, _ = train_run(tiny_config(str(tmp_path / "kl"), steps=1, optim__kl_coef=0.1), task=Constant())
    assert [r["update_skipped"] for r in rec.metrics()] == [0]  # the KL term has a gradient of its own
