"""The evaluator protocol.

An evaluator owns one benchmark (``bfcl-v4``, ``spider-dev``, ``ifeval``, ...):

- ``cases(data_dir, categories)`` loads the benchmark's cases, each with the chat messages a
  model is given (built in the task's own prompt format) and whatever scoring needs;
- ``score(cases, responses)`` scores raw model text (``responses[case.id]``; a missing id is a
  wrong answer, reported as such) and returns per-case rows plus a summary.

The runner (``evals.runner``) handles files, generation with ``--model`` and writing results.
Prediction files (:mod:`evals.prediction_formats`) are matched to cases by ``case.id``, or by the
``meta`` keys ``row`` (0-based position in the benchmark's question file; its index is also
accepted as an id), ``prompt`` (the prompt text) and ``db_id`` (checked against a prediction that
names its database); an evaluator lists the file formats it reads in ``prediction_formats``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mrbench_core.time_budget import TimeBudgetExceeded, time_limit
from tasks.base import DEFAULT_VERIFIER_TIMEOUT_S as VERIFIER_TIMEOUT_S  # training's and mrbench score's
from tasks.base import TIMEOUT_REASON  # noqa: F401  (evaluators import it from here)

T = TypeVar("T")


@dataclass
class EvalCase:
    id: str
    messages: list[dict[str, str]]
    category: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalReport:
    """``rows``: one dict per case (at least ``id``, ``category``, ``valid`` or metric fields).
    ``summary``: the headline figures (floats in [0, 1] unless named otherwise) and counts.
    ``table``: a human-readable Markdown table of the summary.
    ``skipped``: cases that could not be scored, each ``{id, reason}`` (never counted right or wrong).
    """

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    table: str = ""
    skipped: list[dict[str, Any]] = field(default_factory=list)


class Evaluator(ABC):
    """A benchmark: its cases and how raw responses are scored (the module docstring)."""

    name: str = ""
    task: str = ""  # the task whose prompt format and decoding it uses
    #: generation settings for ``--model`` (greedy by default)
    max_new_tokens: int = 1024
    #: formats a ``--predictions`` file may be in (names from :data:`evals.prediction_formats.FORMATS`)
    prediction_formats: tuple[str, ...] = ("jsonl",)
    #: each response's verifiers get this many seconds (None: no limit); past it the response fails
    #: every check with the reason ``timeout`` (:meth:`within_budget`)
    verifier_timeout_s: float | None = VERIFIER_TIMEOUT_S

    #: tries of a response's checks before it is scored as timed out (a second try costs only time here)
    budget_tries: int = 2

    def warm_up(self) -> None:
        """Load what the checks load lazily at their first call (tokenizers, language profiles), so
        that no response's budget pays for it; called once, before the first budgeted check."""

    def within_budget(self, work: Callable[[], T], timed_out: Callable[[], T]) -> tuple[T, bool]:
        """``(work(), False)`` when it finishes within :attr:`verifier_timeout_s` of CPU time
        (:func:`mrbench_core.time_budget.time_limit`), tried :attr:`budget_tries` times, else
        ``(timed_out(), True)``: one response's checks, bounded as training and ``mrbench score``
        bound them, after :meth:`warm_up`."""
        if not getattr(self, "_warmed_up", False):
            self.warm_up()
            self._warmed_up = True
        for _ in range(max(1, self.budget_tries)):
            try:
                with time_limit(self.verifier_timeout_s):
                    return work(), False
            except TimeBudgetExceeded:
                continue
        return timed_out(), True

    def read_responses_as(self, prediction_format: str) -> None:
        """Told the predictions' format before ``score``. An evaluator whose official files hold the
        answer in another syntax than its task's (BFCL result files) decodes accordingly; by default
        every format carries raw model text and nothing changes."""

    @abstractmethod
    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        """Load the benchmark. Raise a clear error naming the expected layout when data is absent."""

    @abstractmethod
    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        """Score raw responses. Never raises on model output."""
