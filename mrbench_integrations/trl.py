"""mrbench's tasks for TRL's ``GRPOTrainer``: a dataset of prompts and one reward function per reward.

The use (docs/trl-and-verl.md)::

    from mrbench_integrations.trl import grpo_inputs
    dataset, reward_funcs = grpo_inputs("ifollow", limit=256)
    trainer = GRPOTrainer(model=..., reward_funcs=reward_funcs, train_dataset=dataset,
                          args=GRPOConfig(multi_objective_aggregation="normalize_then_sum", ...))

The dataset (:func:`prompt_dataset`) has the columns ``prompt`` (the task's chat messages: TRL
renders them with the model's chat template), ``mrbench_example`` (the example as JSON: what
the verifiers read; TRL hands every extra column to the reward functions) and ``mrbench_id``.

The reward functions (:func:`reward_functions`) have TRL's signature
``f(prompts, completions, **columns) -> list[float | None]``; each is named by its reward key
(:mod:`mrbench_integrations.task_rewards`: ``punctuation:no_comma`` for an instruction-following
constraint type, ``execution`` for text-to-SQL), which TRL logs as ``rewards/{key}/mean``. A
function returns None where its reward does not apply to the prompt (TRL's convention: it leaves
the value out of the reward's mean and of its group's statistics, as mrbench does with NaN), and a
verifier that fails (time budget, error) gives the failure value 0, with a warning on the
``mrbench_integrations`` logger. TRL calls the functions in turn on the same batch; the verifiers
run once per completion for all of them. Where TRL passes ``log_extra``, each completion's
failure (``timeout``, ``verifier error: ...``; empty when the verifiers judged it) goes to TRL's
completions table as the column ``mrbench_failure``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from mrbench_integrations.task_rewards import (
    CompletionScorer,
    ScoredCompletion,
    decode_example,
    encode_example,
    keys_of,
    resolve_task,
)
from tasks.base import DEFAULT_VERIFIER_TIMEOUT_S, Example, Task
from tasks.data_source import load_examples

#: the dataset column that carries each prompt's example as JSON
EXAMPLE_COLUMN = "mrbench_example"
ID_COLUMN = "mrbench_id"
#: the column of TRL's completions table that names each completion's verifier failure
FAILURE_COLUMN = "mrbench_failure"

RewardFunction = Callable[..., list[float | None]]


class GRPOInputs(NamedTuple):
    """What ``GRPOTrainer`` takes from mrbench: ``train_dataset`` and ``reward_funcs``."""

    dataset: Any  # a datasets.Dataset
    reward_funcs: list[RewardFunction]


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ImportError("mrbench_integrations.trl builds a datasets.Dataset: pip install trl (which brings "
                          "datasets), or pip install datasets") from None
    return datasets


def examples_dataset(examples: Sequence[Example]) -> Any:
    """A ``datasets.Dataset`` of these examples (module docstring: its columns)."""
    if not examples:
        raise ValueError("no examples to build a dataset from")
    return _datasets().Dataset.from_dict({
        "prompt": [list(ex.messages) for ex in examples],
        EXAMPLE_COLUMN: [encode_example(ex) for ex in examples],
        ID_COLUMN: [ex.id for ex in examples],
    })


def prompt_dataset(task: str | Task, *, split: str = "train", data_dir: str | None = None, limit: int | None = None,
                   seed: int = 0, options: Mapping[str, Any] | None = None) -> Any:
    """The prompts an mrbench run of ``task`` trains on (the same ``split``, ``data_dir``,
    ``limit`` and ``seed`` give the same prompts), as a ``datasets.Dataset``."""
    task = resolve_task(task, options)
    return examples_dataset(load_examples(task, split, data_dir, limit, seed))


def _examples_of(examples: Any) -> list[Example]:
    if hasattr(examples, "column_names"):  # a datasets.Dataset
        if EXAMPLE_COLUMN not in examples.column_names:
            raise ValueError(f"the dataset has no {EXAMPLE_COLUMN!r} column (columns: {examples.column_names}); "
                             f"build it with mrbench_integrations.trl.prompt_dataset")
        return [_decode(text) for text in examples[EXAMPLE_COLUMN]]
    return [ex if isinstance(ex, Example) else _decode(ex) for ex in examples]


@functools.lru_cache(maxsize=8192)
def _decode(text: str) -> Example:
    return decode_example(text)


class BatchScores:
    """The scored completions of the batch TRL is scoring now, shared by all of a task's reward
    functions: TRL calls each on the same batch in turn, the first of them scores it (so a batch
    equal to the one before is scored and logged again) and the others reuse its scores."""

    def __init__(self, scorer: CompletionScorer) -> None:
        self.scorer = scorer
        self._batch: tuple[list[str], list[Any]] | None = None
        self._scored: list[ScoredCompletion] = []

    def of(self, examples: Sequence[str], completions: Sequence[Any], log_extra: Callable | None,
           first: bool) -> list[ScoredCompletion]:
        batch = (list(examples), list(completions))
        if first or batch != self._batch:
            if len(batch[0]) != len(batch[1]):
                raise ValueError(f"{len(batch[0])} {EXAMPLE_COLUMN} values for {len(batch[1])} completions")
            self._scored = [self.scorer.score(_decode(ex), c) for ex, c in zip(*batch)]
            self._batch = batch
            if log_extra is not None:
                log_extra(FAILURE_COLUMN, [s.failure or "" for s in self._scored])
        return self._scored


def _reward_function(key: str, scores: BatchScores, first: bool) -> RewardFunction:
    def reward(prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
               **columns: Any) -> list[float | None]:
        if completions is None:
            raise TypeError(f"mrbench reward {key!r}: called without completions (TRL passes completions=...)")
        if EXAMPLE_COLUMN not in columns:
            raise ValueError(f"mrbench reward {key!r}: the batch has no {EXAMPLE_COLUMN!r} column (columns: "
                             f"{sorted(columns)}); train on mrbench_integrations.trl.prompt_dataset's dataset")
        scored = scores.of(columns[EXAMPLE_COLUMN], completions, columns.get("log_extra"), first)
        return [s.values.get(key) for s in scored]

    reward.__name__ = reward.__qualname__ = key
    reward.__doc__ = f"mrbench reward {key!r} of task {scores.scorer.task.name!r} (None where it does not apply)"
    return reward


def reward_functions(task: str | Task, examples: Any, *, time_budget_s: float | None = DEFAULT_VERIFIER_TIMEOUT_S,
                     options: Mapping[str, Any] | None = None) -> list[RewardFunction]:
    """One TRL reward function per reward key of ``examples`` (a dataset from :func:`prompt_dataset`,
    or examples), in the order each key first appears; each response is scored within
    ``time_budget_s`` (None: no limit)."""
    task = resolve_task(task, options)
    keys = keys_of(task, _examples_of(examples))
    scores = BatchScores(CompletionScorer(task, time_budget_s))
    return [_reward_function(key, scores, i == 0) for i, key in enumerate(keys)]


def grpo_inputs(task: str | Task, *, split: str = "train", data_dir: str | None = None, limit: int | None = None,
                seed: int = 0, options: Mapping[str, Any] | None = None,
                time_budget_s: float | None = DEFAULT_VERIFIER_TIMEOUT_S) -> GRPOInputs:
    """:func:`prompt_dataset` and its :func:`reward_functions`, for one task instance."""
    task = resolve_task(task, options)
    dataset = prompt_dataset(task, split=split, data_dir=data_dir, limit=limit, seed=seed)
    return GRPOInputs(dataset, reward_functions(task, dataset, time_budget_s=time_budget_s))
