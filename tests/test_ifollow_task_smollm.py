"""Slow: the embedded SmolLM2-135M on generated prompts; rewards must vary within groups.

This is what the main job needs from its default training set: for GRPO-style group
standardisation (and MRTPO's replay of varying rewards) a constraint's reward must differ
between the G responses of a prompt. Samples 8 responses (temperature 1) for 2 generated
prompts and prints each constraint type's satisfaction rate.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch

from tasks.data_source import load_examples
from tasks.ifollow.task import InstructionFollowingTask


@pytest.mark.slow
def test_smollm2_rewards_vary_within_groups() -> None:
    from harness.backends.rollout import sample
    from harness.models import EMBEDDED_SMOLLM2, chat_prompt_ids, eos_ids, load_model
    from harness.training.batch import decode_response

    torch.manual_seed(0)
    loaded = load_model(EMBEDDED_SMOLLM2)
    task = InstructionFollowingTask()
    examples = load_examples(task, limit=2, seed=0)
    group = 8
    prompts = [chat_prompt_ids(loaded.tokenizer, ex.messages) for ex in examples]
    eos = eos_ids(loaded.tokenizer, loaded.model)
    outs = sample(loaded.model, loaded.tokenizer, [p for p in prompts for _ in range(group)], eos,
                  max_new_tokens=120, temperature=1.0, batch_size=16)
    rates: dict[str, list[float]] = defaultdict(list)
    varying = 0
    total = 0
    for g, ex in enumerate(examples):
        texts = [decode_response(loaded.tokenizer, ids) for ids, _ in outs[g * group:(g + 1) * group]]
        values = [[v.value for v in task.score(ex, t)] for t in texts]
        for k, name in enumerate(ex.reward_names):
            column = [row[k] for row in values]
            rates[name.split(":", 1)[1]].append(sum(column))
            total += 1
            varying += len(set(column)) > 1
    print("\nSmolLM2-135M, 8 samples per prompt, satisfied counts per constraint type:")
    for cid, counts in sorted(rates.items()):
        print(f"  {cid}: {[int(c) for c in counts]} /8")
    print(f"constraints whose reward varies within its group: {varying}/{total}")
    assert varying >= total // 4
