"""An algorithm's own loss term goes through one declared hook, ``Algorithm.own_loss``, from which
``has_loss`` is derived; the update adds it for any algorithm, not for OPSD by name. ``Pull`` is
defined in this file only."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from algorithms import get_algorithm
from algorithms.base import Algorithm


@dataclass
class NoConfig:
    """No parameters."""


class Zero(Algorithm):
    """No advantage at all (the update has nothing to do without a term of the algorithm's own)."""

    name = "zero"
    config_class = NoConfig

    def token_advantages(self, batch):
        return torch.zeros(batch.response_mask.shape)


class Pull(Zero):
    """A new family with a loss of its own: the squared distance of the student's logits to the
    teacher's, on the valid tokens; it records what the update gave it."""

    seen: ClassVar[list[tuple[tuple[int, ...], tuple[int, ...], int]]] = []

    def own_loss(self, student_logits, teacher_logits, response_mask):
        self.seen.append((tuple(student_logits.shape), tuple(teacher_logits.shape), int(response_mask.sum())))
        d = (student_logits - teacher_logits.detach()).pow(2).sum(-1)
        return (d * response_mask).sum() / response_mask.sum().clamp_min(1)


def test_has_loss_is_derived_from_own_loss():
    assert Pull.has_loss and Pull().has_loss and not Zero.has_loss
    assert get_algorithm("opsd").has_loss and not get_algorithm("mrtpo").has_loss
    with pytest.raises(TypeError, match="has_loss is derived from own_loss"):
        type("Claims", (Zero,), {"has_loss": True})
    with pytest.raises(TypeError, match="implements own_loss"):
        type("Denies", (Pull,), {"has_loss": False, "own_loss": Pull.own_loss})
    with pytest.raises(NotImplementedError, match="no loss of its own"):
        Zero().own_loss(torch.zeros(1, 1, 2), torch.zeros(1, 1, 2), torch.ones(1, 1, dtype=torch.bool))


@pytest.mark.usefixtures("one_torch_thread")
def test_the_update_adds_any_algorithms_own_loss_on_the_teacher_logits():
    from harness.backends.update import PolicyUpdate, Reference
    from harness.config import OptimConfig
    from harness.models import load_model
    from harness.training.batch import Rollout
    from tasks.base import Example

    model = load_model("tiny-random", dtype="float32").model
    ex = Example(id="e", messages=[{"role": "user", "content": "hi"}], reward_names=["a"])
    rollouts = [Rollout(ex, 0, [5, 6, 7], [40 + i, 41, 42 + i][: 2 + i % 2], "", False) for i in range(4)]
    H = model.config.hidden_size
    teacher = [torch.randn(len(r.response_ids), H, generator=torch.Generator().manual_seed(j))
               for j, r in enumerate(rollouts)]
    zero = torch.zeros(4, 3)  # no advantage: without the loss term the step has no gradient
    ref = Reference(copy.deepcopy(model).eval().requires_grad_(False))
    update = PolicyUpdate(model, OptimConfig(lr=1e-2, micro_batch_size=2), 1.0, 0, torch.device("cpu"), reference=ref)
    assert update(rollouts, zero, 3, Zero(), teacher).skipped
    Pull.seen.clear()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    stats = update(rollouts, zero, 3, Pull(), teacher)
    assert not stats.skipped and stats.extra_loss > 0 and stats.grad_norm > 0
    V = model.config.vocab_size
    # two micro-batches, each as wide as its longest response: responses 0 and 2 (2 tokens), 1 and 3 (3 tokens)
    assert sorted(Pull.seen) == [((2, 2, V), (2, 2, V), 4), ((2, 3, V), (2, 3, V), 6)]
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert update(rollouts, zero, 3, Pull(), None).skipped  # no teacher replay: the term is not added
