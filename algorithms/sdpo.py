"""SDPO with the verifier blocks as its feedback.

"Reinforcement Learning via Self-Distillation" (Hübotter et al. 2026, arXiv 2601.20802): the policy
conditioned on feedback f about its own response (the self-teacher) is distilled into the policy on
the plain prompt, token by token on that response,

    L = sum_t KL( pi(. | x, y<t) || stopgrad pi(. | x, f, y<t) ).

The one-sample estimate of that gradient on the sampled token is the policy gradient with the
per-token advantage

    A_t = log pi(y_t | x, f, y<t) - log pi(y_t | x, y<t),

the form here: the paper's own, one teacher for the response, and no reward's advantage (SDPO
replaces the outcome advantage with this signal). The feedback is every verifier block of the
response, so the teacher's context is the task's P_all of MRTPO's Eq. 4 (``ReplayRequest.FEEDBACK``:
``batch.logprob_delta`` from the old policy; a token not replayed, NaN, gets 0): for text-to-SQL the execution
error or success and the reference query, for tool calling the verifiers' blocks. Instruction
following's blocks are the constraint sentences its prompt already holds, so its self-teacher would
be the student and the task refuses the replay.

Our choices: the sampled-token estimator (the paper's full-distribution or top-k KL would need the
teacher's logits in the update, as OPSD's loss has them); ``clip`` bounds |A_t| (off by default);
no per-reward form: SDPO has no outcome advantage to split by reward, and a teacher per reward block
is what MRTPO's leave-one-out replay already measures.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.base import Advantages, Algorithm, ReplayRequest, RolloutBatch, finite_or_nan, masked_mean
from algorithms.registry import ALGORITHMS
from mrbench_core.fields import setting


@dataclass
class SDPOConfig:
    """clip: the largest |A_t| (None: no clip)."""

    clip: float | None = setting(None, help="largest size of a token's advantage, the teacher-student log-ratio "
                                            "(null: no clip)", gt=0)


@ALGORITHMS.register("sdpo")
class SDPO(Algorithm):
    """SDPO (arXiv 2601.20802): token advantage = log-ratio of a self-teacher given every verifier block to the policy."""

    replay_request = ReplayRequest.FEEDBACK
    config_class = SDPOConfig

    def advantages(self, batch: RolloutBatch) -> Advantages:
        mask = batch.response_mask
        if batch.logprob_delta is None:
            raise ValueError(f"{self.name} at step {batch.step} needs batch.logprob_delta [B,T] from the "
                             f"{ReplayRequest.FEEDBACK.value} replay; got None")
        delta = batch.logprob_delta.detach().to(torch.float32)
        delta = torch.where(torch.isfinite(delta) & mask, delta, torch.zeros_like(delta))
        if self.config.clip is not None:
            delta = delta.clamp(-self.config.clip, self.config.clip)
        teacher_prefers = (delta > 0) & mask
        return Advantages(delta, {
            "adv_abs_mean": finite_or_nan(masked_mean(delta.abs(), mask)),
            "teacher_prefers_share": float(teacher_prefers.sum()) / max(1, int(mask.sum())),
        })
