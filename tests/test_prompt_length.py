"""Prompts longer than sampling.max_prompt_tokens are dropped before training, counted with the
policy's tokenizer exactly as sampling counts them, and reported; a run never fails mid-way on a
prompt's length."""

from __future__ import annotations

import os

import pytest
import torch
from toy_task import ToyTask, tiny_config

from harness.backends.local import LocalBackend
from harness.models import chat_prompt_ids, load_model
from harness.records import RunRecord, load_record
from harness.training.batch import fit_prompts
from tasks.base import Example
from tasks.data_source import load_examples


class LongPromptToy(ToyTask):
    """The toy task with two of its six prompts made far longer than the others."""

    def load(self, split="train", data_dir=None):
        out = super().load(split, data_dir)
        for ex in out[:2]:
            ex.messages[-1]["content"] += " filler" * 200
        return out


def test_fit_prompts_counts_like_sampling():
    tok = load_model("tiny-random", dtype="float32").tokenizer
    examples = load_examples(LongPromptToy())
    lengths = [len(chat_prompt_ids(tok, ex.messages)) for ex in examples]
    limit = sorted(lengths)[-3]  # keeps the four short prompts only
    kept, dropped = fit_prompts(examples, tok, limit)
    assert dropped == 2 and all(len(chat_prompt_ids(tok, ex.messages)) <= limit for ex in kept)
    assert fit_prompts(examples, tok, None) == (examples, 0)


def test_a_run_drops_long_prompts_and_reports_them(tmp_path, capsys):
    torch.set_num_threads(1)
    tok = load_model("tiny-random", dtype="float32").tokenizer
    cfg = tiny_config(str(tmp_path / "r"), "grpo", steps=2)
    cfg.sampling.max_prompt_tokens = sorted(len(chat_prompt_ids(tok, ex.messages)) for ex in load_examples(LongPromptToy()))[-3]
    rec = RunRecord.open(cfg)
    try:
        LocalBackend(cfg, task=LongPromptToy()).train(rec)
    finally:
        rec.unlock()
    assert "dropped 2 of 6 prompts" in capsys.readouterr().out
    assert load_record(tmp_path / "r")["provenance"]["prompts_too_long"] == 2


@pytest.mark.skipif(not os.environ.get("MRBENCH_DATA_DIR"), reason="needs MRBENCH_DATA_DIR (Spider)")
def test_text2sql_counts_with_the_policys_tokenizer():
    from tasks.text2sql.task import Text2SQLTask

    tok = load_model("tiny-random", dtype="float32").tokenizer
    spider = os.path.join(os.environ["MRBENCH_DATA_DIR"], "spider")
    sizes = sorted(len(chat_prompt_ids(tok, e.messages)) for e in load_examples(Text2SQLTask(max_prompt_tokens=10**6), 
        "train", spider, limit=20))
    limit = sizes[len(sizes) // 2]
    task = Text2SQLTask(max_prompt_tokens=limit)
    task.use_tokenizer(tok)
    examples = load_examples(task, "train", spider, limit=20)
    report = task.last_load_report
    assert report["token_count"] == "tokenizer" and report["too_long"] > 0 and examples
    assert all(len(chat_prompt_ids(tok, e.messages)) <= limit for e in examples)
    assert isinstance(examples[0], Example)
