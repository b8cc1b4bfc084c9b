"""TRL's own GRPOTrainer trains on mrbench's tasks (issue 50): TRL 1.16 trains ``tiny-random`` for
two steps on generated ifollow prompts with :func:`mrbench_integrations.trl.grpo_inputs`'s reward
functions, once with ``normalize_then_sum`` (GDPO) and once with ``sum_then_normalize`` (GRPO).
A subclass records, per generation batch, what TRL's own ``_calculate_rewards`` returned (its
per-reward rewards, as it logs them) and the advantages its ``_generate_and_score_completions``
returned; nothing of TRL is re-implemented. Checked on those batches:

- each reward TRL logged (per completion, and ``rewards/{key}/mean`` per step) is what
  ``mrbench score ifollow`` gives the same completion;
- TRL's GDPO advantages equal mrbench's ``gdpo`` (``eps: 1e-4``, ``rescale: trl``) on TRL's own
  per-reward rewards, and its GRPO advantages mrbench's ``grpo`` (``eps: 1e-4``), within 1e-6;
- where the two differ by design, the difference: a completion every reward function returns None
  for (unscorable) gets advantage 0 from TRL and is left out of its batch statistics, where
  mrbench's ``gdpo`` has no such rows; a residue batch (per-reward z-scores that cancel up to
  their epsilons) is divided by TRL and not by mrbench;
- the saved checkpoint evaluates with ``mrbench eval ifollow-heldout --model DIR``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

pytest.importorskip("trl", reason="TRL is installed by scripts/setup.sh --dev (trl==1.16.0)")

from trl import GRPOConfig, GRPOTrainer

from algorithms import RolloutBatch, get_algorithm
from harness import cli
from harness.models import load_model
from mrbench_integrations.task_rewards import decode_example, reward_keys
from mrbench_integrations.trl import EXAMPLE_COLUMN, FAILURE_COLUMN, grpo_inputs
from tasks.registry import make_task

pytestmark = pytest.mark.usefixtures("one_torch_thread")

G = 4  # completions per prompt
PROMPTS = 4  # prompts per step
STEPS = 2
TRL_EPS = 1e-4  # TRL's epsilon in both z-scores (its normalize_then_sum and sum_then_normalize)


@dataclass
class Batch:
    """One generation batch as TRL's own step saw and scored it."""

    examples: list[str]  # mrbench_example per completion
    texts: list[str]  # the completion texts TRL handed the reward functions
    rewards: torch.Tensor  # [B, F] TRL's rewards_per_func (NaN where a function returned None)
    advantages: torch.Tensor = field(default_factory=lambda: torch.empty(0))  # [B] from its scoring step


class RecordingTrainer(GRPOTrainer):
    """GRPOTrainer that keeps what its own reward and advantage computation returned."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[Batch] = []

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.batches.append(Batch([row[EXAMPLE_COLUMN] for row in inputs], [c[0]["content"] for c in completions],
                                  rewards.detach().clone()))
        return rewards

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self.batches[-1].advantages = output["advantages"].detach().clone()
        return output


def trainer_for(out: Path, aggregation: str, reward_funcs: list, dataset: Any, steps: int = STEPS) -> RecordingTrainer:
    loaded = load_model("tiny-random")
    args = GRPOConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=PROMPTS * G, num_generations=G,
                      max_completion_length=32, learning_rate=1e-3, bf16=False, gradient_checkpointing=False,
                      use_cpu=True, report_to="none", logging_steps=1, save_strategy="no", seed=0,
                      multi_objective_aggregation=aggregation)
    return RecordingTrainer(model=loaded.model, processing_class=loaded.tokenizer, reward_funcs=reward_funcs,
                            train_dataset=dataset, args=args)


@pytest.fixture(scope="module")
def gdpo_run(tmp_path_factory):
    """The issue's run: GDPO (normalize_then_sum) on ifollow, two steps, checkpoint saved."""
    out = tmp_path_factory.mktemp("trl-gdpo")
    dataset, reward_funcs = grpo_inputs("ifollow", limit=PROMPTS * STEPS)
    trainer = trainer_for(out / "run", "normalize_then_sum", reward_funcs, dataset)
    trainer.train()
    trainer.save_model(str(out / "checkpoint"))
    return trainer, reward_funcs, out / "checkpoint"


@pytest.fixture(scope="module")
def grpo_run(tmp_path_factory):
    dataset, reward_funcs = grpo_inputs("ifollow", limit=PROMPTS * STEPS)
    trainer = trainer_for(tmp_path_factory.mktemp("trl-grpo"), "sum_then_normalize", reward_funcs, dataset)
    trainer.train()
    return trainer, reward_funcs


def official_row(example_json: str, response: str) -> dict[str, Any]:
    """The ifollow example as ``mrbench score`` reads it (IFEval's row form) plus the response."""
    meta = decode_example(example_json).meta
    return {"key": decode_example(example_json).id, "prompt": meta["prompt"],
            "instruction_id_list": [cid for cid, _ in meta["constraints"]],
            "kwargs": [kw for _, kw in meta["constraints"]], "response": response}


def mrbench_scores(batch: Batch, names: list[str], tmp: Path) -> torch.Tensor:
    """[B, F]: ``mrbench score ifollow`` on the batch's completions, by reward key (NaN: absent)."""
    tmp.mkdir(parents=True, exist_ok=True)
    data, out = tmp / "rows.jsonl", tmp / "scored.jsonl"
    data.write_text("".join(json.dumps(official_row(e, t)) + "\n" for e, t in zip(batch.examples, batch.texts)))
    assert cli.main(["score", "ifollow", "--data", str(data), "--out", str(out)]) == 0
    task = make_task("ifollow")
    table = torch.full((len(batch.texts), len(names)), float("nan"))
    for i, (line, example_json) in enumerate(zip(out.read_text().splitlines(), batch.examples)):
        scored = json.loads(line)
        keys = reward_keys(task, decode_example(example_json))
        assert len(keys) == len(scored["reward_names"])
        for key, name in zip(keys, scored["reward_names"]):
            table[i, names.index(key)] = scored["rewards"][name]
    return table


def rollout(rewards: torch.Tensor) -> RolloutBatch:
    B = rewards.shape[0]
    return RolloutBatch(rewards=rewards, group_ids=torch.arange(B) // G,
                        response_mask=torch.ones(B, 1, dtype=torch.bool))


def test_trl_logs_the_rewards_mrbench_score_gives(gdpo_run, tmp_path):
    trainer, reward_funcs, _ = gdpo_run
    names = [f.__name__ for f in reward_funcs]
    assert trainer.reward_func_names == names and len(trainer.batches) == STEPS
    logged = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logged) == STEPS
    seen_varying = 0
    for step, (batch, log) in enumerate(zip(trainer.batches, logged)):
        assert len({batch.examples[i] for i in range(0, len(batch.examples), G)}) == PROMPTS
        assert all(batch.examples[i] == batch.examples[i - i % G] for i in range(len(batch.examples)))  # groups
        expected = mrbench_scores(batch, names, tmp_path / f"step{step}")
        assert torch.equal(torch.isnan(batch.rewards), torch.isnan(expected))
        assert torch.equal(torch.nan_to_num(batch.rewards, nan=-1.0), torch.nan_to_num(expected, nan=-1.0))
        for j, name in enumerate(names):
            column = expected[:, j][~torch.isnan(expected[:, j])]
            mean = log[f"rewards/{name}/mean"]
            if column.numel():
                assert mean == pytest.approx(column.mean().item(), abs=1e-6), (step, name)
                seen_varying += int(column.unique().numel() > 1)
            else:  # no prompt of this batch has the constraint type: TRL logs NaN (as None)
                assert mean is None or math.isnan(mean)
    assert seen_varying >= 2  # the comparison is not vacuous: rewards moved within the batches
    assert len(trainer._logs["extra"][FAILURE_COLUMN]) == len(trainer._logs["prompt"])  # the failure column


def test_trl_gdpo_advantages_are_mrbench_gdpo_with_trl_rescale(gdpo_run):
    trainer, _, _ = gdpo_run
    gdpo = get_algorithm("gdpo", eps=TRL_EPS, rescale="trl")
    moved = 0
    for batch in trainer.batches:
        ours = gdpo.response_advantages(rollout(batch.rewards))
        assert (ours - batch.advantages).abs().max().item() <= 1e-6
        moved += int(batch.advantages.abs().max().item() > 0.1)
    assert moved >= 1  # at least one batch had a learning signal


def test_trl_grpo_advantages_are_mrbench_grpo(grpo_run):
    trainer, _ = grpo_run
    grpo = get_algorithm("grpo", eps=TRL_EPS)
    moved = 0
    for batch in trainer.batches:
        ours = grpo.response_advantages(rollout(batch.rewards))
        assert (ours - batch.advantages).abs().max().item() <= 1e-6
        moved += int(batch.advantages.abs().max().item() > 0.1)
    assert moved >= 1


# -- the differences by design: TRL's own step on set rewards ---------------------------------------

ROWS = PROMPTS * G
#: two rewards per completion, set by the test (None: the function cannot score it)
SET_A = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
SET_B = [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]
UNSCORABLE = (0, 5, 10)  # one completion in each of three groups


def set_rewards(name: str, values: list[float | None]):
    def reward(prompts=None, completions=None, **columns):
        return list(values)

    reward.__name__ = name
    return reward


def run_set(tmp: Path, aggregation: str, a: list, b: list) -> Batch:
    dataset, _ = grpo_inputs("ifollow", limit=PROMPTS)
    trainer = trainer_for(tmp, aggregation, [set_rewards("a", a), set_rewards("b", b)], dataset, steps=1)
    trainer.train()
    (batch,) = trainer.batches
    return batch


def test_unscorable_completions_trl_zeroes_and_leaves_out_of_its_batch_statistics(tmp_path):
    """TRL: a completion every function returns None for gets advantage 0, and its GDPO batch mean
    and std leave it out. mrbench's GDPO has no unscorable rows: all-NaN rewards give S = 0, which
    stays in the batch rescale's std (and mean). So TRL's advantages are mrbench's on the batch
    without those rows; on the whole batch the other rows' advantages differ (a std over more rows).
    For GRPO both leave such a row out of its group's statistics and give it 0: no difference."""
    a = [None if i in UNSCORABLE else v for i, v in enumerate(SET_A)]
    b = [None if i in UNSCORABLE else v for i, v in enumerate(SET_B)]
    batch = run_set(tmp_path / "gdpo", "normalize_then_sum", a, b)
    scorable = torch.tensor([i not in UNSCORABLE for i in range(ROWS)])
    assert torch.isnan(batch.rewards[~scorable]).all() and not torch.isnan(batch.rewards[scorable]).any()
    assert (batch.advantages[~scorable] == 0).all()
    gdpo = get_algorithm("gdpo", eps=TRL_EPS, rescale="trl")
    kept = RolloutBatch(rewards=batch.rewards[scorable], group_ids=(torch.arange(ROWS) // G)[scorable],
                        response_mask=torch.ones(int(scorable.sum()), 1, dtype=torch.bool))
    assert (gdpo.response_advantages(kept) - batch.advantages[scorable]).abs().max().item() <= 1e-6
    whole = gdpo.response_advantages(rollout(batch.rewards))
    assert (whole - batch.advantages)[scorable].abs().max().item() > 1e-3  # the difference is real

    grpo_batch = run_set(tmp_path / "grpo", "sum_then_normalize", a, b)
    assert (grpo_batch.advantages[~scorable] == 0).all()
    grpo = get_algorithm("grpo", eps=TRL_EPS).response_advantages(rollout(grpo_batch.rewards))
    assert (grpo - grpo_batch.advantages).abs().max().item() <= 1e-6


def test_residue_batch_trl_divides_it_and_mrbench_does_not(tmp_path):
    """Reward b = 2 (1 - a): in every group z_b = -z_a up to the epsilons (2 sigma + eps against
    2 (sigma + eps)), so S is a residue of order 1e-5 and its batch std is below TRL's 1e-4.
    TRL divides S - mean(S) by that std + 1e-4, giving advantages of order 0.1; mrbench's ``trl``
    rescale does not divide a batch whose spread is at or below its epsilon (algorithms/gdpo.py:
    rescale_affine), leaving the residue as it is."""
    batch = run_set(tmp_path / "residue", "normalize_then_sum", SET_A, [2.0 * (1.0 - v) for v in SET_A])
    gdpo = get_algorithm("gdpo", eps=TRL_EPS, rescale="trl")
    agg = gdpo.aggregate(rollout(batch.rewards))
    spread = agg.uniform.std().item()
    assert 0 < spread <= TRL_EPS
    ours = gdpo.response_advantages(rollout(batch.rewards))
    assert torch.allclose(ours, agg.uniform - agg.uniform.mean(), rtol=0, atol=1e-9)  # the residue, not divided
    assert batch.advantages.abs().max().item() >= 0.1  # TRL's, divided by spread + 1e-4
    nonzero = ours.abs() > 1e-7
    ratio = batch.advantages[nonzero] / ours[nonzero]  # TRL's = mrbench's / (spread + 1e-4)
    assert ratio.tolist() == pytest.approx([1.0 / (spread + TRL_EPS)] * int(nonzero.sum()), rel=1e-2)


def test_the_trl_checkpoint_evaluates_with_mrbench_eval(gdpo_run, tmp_path, capsys):
    _, _, checkpoint = gdpo_run
    out = tmp_path / "eval"
    assert cli.main(["eval", "ifollow-heldout", "--model", str(checkpoint), "--limit", "2", "--max-new-tokens", "16",
                     "--max-minutes", "0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cases"] == 2 and summary["source"] == f"model:{checkpoint}"
    assert "| benchmark | prompt-level | instruction-level | prompts |" in printed
    assert f"| ifollow-heldout | {summary['prompt_level']:.4f} | {summary['instruction_level']:.4f} | 2 |" in printed
