"""Slow (minutes on a shared CPU): the embedded SmolLM2-135M on demo and BFCL prompts.

Checks that the RLLA prompts fit the recipe's prompt length (2,048 tokens) with the embedded
tokenizer, that sampled responses score within range, and that the BFCL decoder and checker
take real model text without error. Prints the format rate and the correctness values (a base
model this small rarely passes the exact format, as the recipe notes for small base models).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch

from evals.bfcl import BFCLv4Evaluator, package_data_dir, score_case
from tasks.data_source import load_examples
from tasks.toolcall.task import ToolCallTask


@pytest.mark.slow
def test_smollm2_on_demo_and_bfcl_prompts() -> None:
    from harness.backends.rollout import sample
    from harness.models import EMBEDDED_SMOLLM2, chat_prompt_ids, eos_ids, load_model
    from harness.training.batch import decode_response

    torch.manual_seed(0)
    loaded = load_model(EMBEDDED_SMOLLM2)
    task = ToolCallTask()
    examples = load_examples(task, "test", limit=2, seed=0)
    lengths = [len(chat_prompt_ids(loaded.tokenizer, ex.messages)) for ex in load_examples(task, "test")]
    print(f"\ndemo prompt tokens: min {min(lengths)}, max {max(lengths)}")
    assert max(lengths) <= 2048

    group = 4
    prompts = [chat_prompt_ids(loaded.tokenizer, ex.messages) for ex in examples]
    eos = eos_ids(loaded.tokenizer, loaded.model)
    outs = sample(loaded.model, loaded.tokenizer, [p for p in prompts for _ in range(group)], eos,
                  max_new_tokens=96, temperature=1.0, batch_size=8)
    formats, corrects = [], []
    for g, ex in enumerate(examples):
        for ids, _ in outs[g * group:(g + 1) * group]:
            fmt, cor = task.score(ex, decode_response(loaded.tokenizer, ids))
            assert fmt.value in (0.0, 1.0) and -3.0 <= cor.value <= 3.0
            formats.append(fmt.value)
            corrects.append(cor.value)
    print(f"SmolLM2-135M, {len(formats)} samples: format rate {sum(formats) / len(formats):.2f}, "
          f"correctness values {dict(Counter(round(c, 2) for c in corrects))}")

    data = os.environ.get("MRBENCH_DATA_DIR")
    data_dir = os.path.join(data, "bfcl") if data else package_data_dir()
    if data_dir is None:
        return
    cases = BFCLv4Evaluator().cases(data_dir=data_dir, categories=["simple_python"])[:2]
    ids = [chat_prompt_ids(loaded.tokenizer, c.messages) for c in cases]
    outs = sample(loaded.model, loaded.tokenizer, ids, eos, max_new_tokens=64, temperature=0.0, batch_size=2)
    rows = [score_case(c, decode_response(loaded.tokenizer, o)) for c, (o, _) in zip(cases, outs)]
    print("BFCL simple_python, greedy:", [(r["valid"], r["error_type"]) for r in rows])
    assert all(isinstance(r["valid"], bool) for r in rows)
