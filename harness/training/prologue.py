"""The run's prologue, written once: what every backend does before its first step.
:meth:`harness.training.step.Step.open` runs it, in this order:

1. the training examples (:func:`training_examples`): the task's ``task.split`` of
   ``task.data_dir`` (``task.limit`` of them, a seeded sample), checked for text no tokenizer
   takes (refused by file and row); with the policy's tokenizer, the task counts prompt tokens
   with it and the examples whose chat prompt is longer than ``sampling.max_prompt_tokens`` are
   dropped and counted; none left is one error;
2. the record started (``record.start``) with the backend's ``extra`` and the prompts dropped;
3. the relevance guard (:class:`~harness.training.relevance_guard.RelevanceGuard`), which looks at
   the first examples and the warm-up;
4. the credit log (:func:`credit_log`, ``output.credit_groups``). It splits responses into tokens
   with the tokenizer: a step given none writes no ``credit.jsonl`` and says why, in one line and
   in ``provenance.json`` (``not_run``).

A process that runs steps of a run whose prologue ran in another process (the openrlhf trainer)
attaches to the record instead (:meth:`~harness.training.step.Step.attach`): its own guard, which
the prologue's already reported the start to, and its own credit log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.training.batch import fit_prompts
from harness.training.credit_log import CreditLog
from mrbench_core.text_check import check_examples
from tasks.base import Example, Task
from tasks.data_source import load_examples

if TYPE_CHECKING:
    from harness.config import RunConfig
    from harness.records import RunRecord


def training_examples(cfg: RunConfig, task: Task, tokenizer: Any = None) -> tuple[list[Example], int]:
    """(the run's training examples, how many prompts were dropped as too long): see step 1 of the
    module docstring. Raises ValueError when none is left."""
    if tokenizer is not None:
        task.use_tokenizer(tokenizer)  # exact prompt lengths for the task's own filters
    examples = load_examples(task, cfg.task.split, cfg.task.data_dir, cfg.task.limit, cfg.seed)
    check_examples(examples, cfg.task.data_dir)  # text no tokenizer takes: refused by file and row
    too_long = 0
    if tokenizer is not None:
        examples, too_long = fit_prompts(examples, tokenizer, cfg.sampling.max_prompt_tokens)
    if not examples:
        raise ValueError(f"task {cfg.task.name!r} loaded no {cfg.task.split!r} examples"
                         + (f" within sampling.max_prompt_tokens={cfg.sampling.max_prompt_tokens} "
                            f"({too_long} longer)" if too_long else ""))
    if too_long:
        print(f"mrbench: dropped {too_long} of {len(examples) + too_long} prompts longer than "
              f"sampling.max_prompt_tokens={cfg.sampling.max_prompt_tokens} tokens")
    return examples, too_long


def start_record(record: RunRecord, cfg: RunConfig, task: Task, examples: list[Example], too_long: int,
                 extra: dict[str, Any]) -> None:
    """``record.start`` with the data's hash and ``extra`` (how the backend runs), plus the prompts dropped."""
    record.start(seed=cfg.seed, task_version=str(task.version), data_hash=Task.data_hash(examples),
                 extra={**extra, "prompts_too_long": too_long})


def credit_log(cfg: RunConfig, task: Task, record: RunRecord, tokenizer: Any) -> CreditLog | None:
    """The run's credit log, or None without a tokenizer (said, where ``output.credit_groups`` asks
    for one, in one line and in the record's ``not_run``)."""
    if tokenizer is not None:
        return CreditLog(cfg.output.credit_groups, record.path, tokenizer, task)
    if cfg.output.credit_groups:
        note = (f"output.credit_groups={cfg.output.credit_groups}: no credit.jsonl (this backend gives the step no "
                f"tokenizer to split its responses into tokens)")
        print(f"mrbench: note: {note}")
        record.update_provenance(not_run=[*record.provenance().get("not_run", []), note])
    return None
