"""The training prompts of an openrlhf run, written for OpenRLHF's prompt loader.

One row per prompt drawn, in the order the local backend draws them
(:func:`harness.training.data_order.examples_at`), so that step n sees the same prompts under
either backend; the trainer reads them in file order. Each row's ``input`` is the rendered chat
prompt (what OpenRLHF logs) and its ``label`` the :mod:`.labels` payload from which the rollout
worker builds the prompt's token ids itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.backends.openrlhf.labels import Label, encode_label
from harness.models import EMBEDDED_SMOLLM2, cache_root, prepare_tokenizer, smollm2_checkpoint
from harness.training.data_order import examples_at
from mrbench_core.jsonio import atomic_write_text


def model_source(cfg: Any, convert: bool = True) -> str:
    """The path or hub id OpenRLHF loads: the embedded model's converted checkpoint (converted on
    first use unless ``convert`` is False, as for a dry run), else ``model.name``."""
    name = cfg.model.name
    if name == EMBEDDED_SMOLLM2:
        if convert:
            return str(smollm2_checkpoint(cfg.model.cache_dir))
        return str(cache_root(cfg.model.cache_dir) / EMBEDDED_SMOLLM2)
    return name


def load_tokenizer(source: str) -> Any:
    """The policy's tokenizer as the harness uses it (:func:`harness.models.prepare_tokenizer`)."""
    from transformers import AutoTokenizer

    return prepare_tokenizer(AutoTokenizer.from_pretrained(source))


def stop_ids(tokenizer: Any, source: str) -> list[int]:
    """End-of-turn ids: the generation config's and the tokenizer's (as :func:`harness.models.eos_ids`)."""
    out: list[int] = []
    try:
        from transformers import GenerationConfig

        configured = GenerationConfig.from_pretrained(source).eos_token_id
    except (OSError, ValueError):
        configured = None
    for ids in (configured, tokenizer.eos_token_id):
        for i in ids if isinstance(ids, (list, tuple)) else ([] if ids is None else [ids]):
            if int(i) not in out:
                out.append(int(i))
    return out


def write_prompts(path: Path, cfg: Any, examples: list[Any], tokenizer: Any, stop: list[int]) -> int:
    """Write the run's prompt rows (``steps x prompts_per_step``); returns how many."""
    s = cfg.sampling
    drawn = examples_at(examples, cfg.seed, 0, cfg.schedule.steps * s.prompts_per_step)
    lines = []
    for ex in drawn:
        text = tokenizer.apply_chat_template(ex.messages, tokenize=False, add_generation_prompt=True)
        label = Label(task=cfg.task.name, task_options=dict(cfg.task.options), example=ex, stop=stop,
                      max_new_tokens=s.max_new_tokens, verifier_timeout_s=cfg.task.verifier_timeout_s)
        lines.append(json.dumps({"input": text, "label": encode_label(label)}, ensure_ascii=False) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "".join(lines))
    return len(lines)
