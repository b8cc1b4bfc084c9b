"""The task protocol: what a task gives the harness and what its verifiers return.

The path of one training step:
1. ``Task.load(split, data_dir)`` yields :class:`Example` s: chat messages plus what the verifiers
   need; the harness keeps its seeded ``limit`` of them (:func:`tasks.data_source.load_examples`).
2. A backend samples responses for ``Example.messages``.
3. ``Task.score(example, response)`` returns one :class:`Verdict` per reward, in the order of
   ``Example.reward_names``. A verdict carries the value (NaN where the reward does not apply),
   a reason, the verifier's information block Z_k as text (``None``: the reward keeps the uniform
   token assignment on this response), and the character spans of the response it read.
   ``Task.score_within(example, response, seconds)`` is the same under a time budget of CPU
   seconds: a response whose verifiers run past it gets every reward's failure value (the low end
   of its declared range) with the reason ``timeout`` (:data:`TIMEOUT_REASON`), so that no model
   output can stall training, and no verdict depends on the machine's load. :meth:`score` runs on
   a copy of the task in a worker process that is killed past the budget, with whatever the
   verifier started (:mod:`tasks.verifier_budget`; the copy is the task as it was pickled at the
   first such call: a task that does not pickle is scored in the calling process, on the main
   thread under an alarm, in any other thread without a limit).
4. ``Task.replay_contexts(...)`` builds the leave-one-out contexts of paper Eq. 4.

A verifier never raises on model output; bad *data* raises :class:`DataError` naming file and row.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mrbench_core.errors import DataError
from mrbench_core.replay_kinds import ReplayRequest
from tasks.data_source import Pool

__all__ = ["DataError", "Example", "Message", "ReplayContexts", "RewardSpec", "Task", "Verdict"]

#: the reason of a verdict whose verifier ran past the time budget (:meth:`Task.score_within`)
TIMEOUT_REASON = "timeout"
#: the default per-response time budget of the verifiers, seconds (config ``task.verifier_timeout_s``)
DEFAULT_VERIFIER_TIMEOUT_S = 5.0

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


@dataclass(frozen=True)
class RewardSpec:
    """A reward a task can emit: its name and its declared range."""

    name: str
    low: float
    high: float
    description: str = ""


@dataclass
class Verdict:
    """One verifier's judgement of one response."""

    reward: str
    value: float
    reason: str
    block: str | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) character spans read
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        value = None if (isinstance(self.value, float) and math.isnan(self.value)) else self.value
        return {
            "reward": self.reward,
            "value": value,
            "reason": self.reason,
            "block": self.block,
            "spans": [list(s) for s in self.spans],
            "detail": self.detail,
        }


@dataclass
class Example:
    """One prompt with everything its verifiers need.

    ``reward_names`` lists this example's rewards in order (K may vary across examples, as in
    instruction following, where each constraint is a reward). ``meta`` holds verifier inputs
    (reference query and database, constraint list, tool schemas and reference calls, ...).
    """

    id: str
    messages: list[Message]
    reward_names: list[str]
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "messages": self.messages, "reward_names": self.reward_names, "meta": self.meta}


def append_to_last_user(messages: Sequence[Message], text: str) -> list[Message]:
    """Return a copy of ``messages`` whose last user message has ``text`` appended after a blank line."""
    out = copy.deepcopy(list(messages))
    for msg in reversed(out):
        if msg.get("role") == "user":
            if text:
                msg["content"] = msg["content"].rstrip("\n") + "\n\n" + text
            return out
    raise ValueError("messages contain no user turn to append verifier blocks to")


@dataclass
class ReplayContexts:
    """Eq. 4: one context with every block (P_all) and one per replayed reward without its block."""

    all: list[Message]
    without: dict[int, list[Message]]  # reward index k -> P_\\k


class Task(ABC):
    """Base class of a task. Subclasses set ``name``, ``version`` and implement the hooks."""

    name: str = ""
    version: str = "0"
    #: reward whose mean is logged as the format rate (None: the task has no format reward)
    format_reward: str | None = "format"
    #: order in which blocks are concatenated into P_all (reward names); None = reward order
    block_order: Sequence[str] | None = None

    # -- what the task offers -------------------------------------------------------------
    def supported_replays(self) -> set[ReplayRequest]:
        """The replay kinds this task can build contexts for. Leave-one-out and joint replays use
        the verifiers' blocks (or the task's own :meth:`replay_contexts`); the rubric replay
        (CoRT) needs :meth:`without_rubric` and the teacher replay (OPSD) needs
        :meth:`teacher_messages`, each supported once a subclass defines it. The read-span masks
        (mrtpo-oracle) come from the verdicts' spans, which every task has (a verifier that reports
        none gives its reward uniform credit); the old policy's entropy and the sampled token ids (the
        token-credit methods) need nothing from the task. SDPO's feedback replay uses P_all of
        :meth:`replay_contexts` as its self-teacher's context; a task whose P_all is its prompt (the
        blocks are already there) leaves it out."""
        kinds = {ReplayRequest.NONE, ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.JOINT, ReplayRequest.READ_SPANS,
                 ReplayRequest.ENTROPY, ReplayRequest.TOKEN_IDS, ReplayRequest.FEEDBACK}
        if type(self).without_rubric is not Task.without_rubric:
            kinds.add(ReplayRequest.RUBRIC)
        if type(self).teacher_messages is not Task.teacher_messages:
            kinds.add(ReplayRequest.TEACHER)
        return kinds

    def default_benchmarks(self, data_dir: str | None = None) -> dict[str, str | None]:
        """The evaluators a run of this task reports at its end: name -> the data directory to
        read it from (None: the evaluator's own default). ``data_dir`` is the task's training
        data directory, for tasks whose benchmark data sits beside it."""
        return {}

    # -- data -----------------------------------------------------------------------------
    def use_tokenizer(self, tokenizer: Any) -> None:
        """The policy's tokenizer, given by the backend before :meth:`load` so that a task that
        filters prompts by length counts tokens exactly (default: not needed)."""

    def data_problem(self, split: str, data_dir: str | None) -> str | None:
        """Why :meth:`load` would find no data for ``split`` in ``data_dir``, told without reading
        the data (``mrbench run`` checks it before any model loads); None when nothing is missing
        (default: a ``data_dir`` that is neither a hub name nor an existing path)."""
        if data_dir and ":" not in str(data_dir) and not os.path.exists(data_dir):
            return f"{data_dir}: no such file or folder"
        return None

    @abstractmethod
    def load(self, split: str = "train", data_dir: str | None = None) -> Pool[Example]:
        """Every example of a split, in file order (or a :class:`tasks.data_source.Generated` /
        :class:`~tasks.data_source.Screened` pool). ``data_dir=None`` means the task's built-in
        data where it has any. The run's ``limit`` and seed are the harness's, applied after this
        by :func:`tasks.data_source.load_examples`."""

    @abstractmethod
    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None) -> Example:
        """Build an example from one row of a user file (``mrbench score``). Raise DataError if malformed."""

    def reward_family(self, reward: str) -> str:
        """The name under which a reward is aggregated across examples in metrics (default: itself).

        Tasks whose reward names are per-example (instruction following: ``c3:punctuation:no_comma``)
        map them to a stable family (``punctuation:no_comma``)."""
        return reward

    @classmethod
    def report_group(cls, family: str) -> str:
        """The curve of ``mrbench report`` a logged reward family (:meth:`reward_family`) belongs to
        (default: its own). Called on the class, without building the task."""
        return family

    def reward_specs(self) -> list[RewardSpec]:
        """Every reward this task can emit (names may be patterns for variable-K tasks)."""
        return []

    def reward_range(self, name: str) -> tuple[float, float] | None:
        """The declared (low, high) of reward ``name`` (None when the task declares none). Tasks whose
        reward names are patterns (one reward per constraint) override this."""
        for spec in self.reward_specs():
            if spec.name == name:
                return spec.low, spec.high
        return None

    # -- verifiers ------------------------------------------------------------------------
    @abstractmethod
    def score(self, example: Example, response: str) -> list[Verdict]:
        """One verdict per reward of ``example.reward_names``, in order. Never raises on ``response``."""

    def warm_up(self) -> None:
        """Load what the verifiers load lazily at their first call (tokenizers, language profiles),
        so that no response's time budget pays for it: a scoring worker process
        (:mod:`mrbench_core.budget_worker`) calls it once at its start, and a task scored in its own
        process before its first budgeted call (:mod:`tasks.verifier_budget`). Nothing by default."""

    def score_within(self, example: Example, response: str,
                     seconds: float | None = DEFAULT_VERIFIER_TIMEOUT_S, retries: int = 0) -> list[Verdict]:
        """:meth:`score` within ``seconds`` of CPU time (None or 0: no limit); past it, every reward
        gets its failure value with the reason ``timeout`` (after ``retries`` more tries): see
        :mod:`tasks.verifier_budget`."""
        from tasks.verifier_budget import score_within

        return score_within(self, example, response, seconds, retries)

    def timeout_verdicts(self, example: Example, seconds: float | None) -> list[Verdict]:
        """Every reward at the low end of its declared range (0.0 when undeclared), reason ``timeout``."""
        return self.failure_verdicts(example, TIMEOUT_REASON, {"timeout_s": seconds})

    def failure_verdicts(self, example: Example, reason: str, detail: dict[str, Any]) -> list[Verdict]:
        """Every reward of ``example`` at the low end of its declared range (0.0 when undeclared),
        with ``reason`` and ``detail``."""
        out = []
        for name in example.reward_names:
            span = self.reward_range(name)
            out.append(Verdict(reward=name, value=float(span[0]) if span else 0.0, reason=reason,
                               detail=dict(detail)))
        return out

    # -- replay contexts ------------------------------------------------------------------
    def replay_contexts(self, example: Example, verdicts: Sequence[Verdict],
                        rewards: Iterable[int]) -> ReplayContexts:
        """Eq. 4 by default: P_all = P_0 + all blocks; P_\\k = P_0 + all blocks but Z_k.

        Blocks are appended to the last user message, separated by blank lines, in
        ``block_order`` (or reward order). Rewards whose verdict has no block are not replayed.
        Tasks whose information is in the prompt itself (instruction following) override this.
        """
        order = list(range(len(verdicts)))
        if self.block_order is not None:
            rank = {n: i for i, n in enumerate(self.block_order)}
            order.sort(key=lambda k: (rank.get(verdicts[k].reward, len(rank)), k))
        with_block = [k for k in order if verdicts[k].block]

        def build(skip: int | None) -> list[Message]:
            text = "\n\n".join(verdicts[k].block for k in with_block if k != skip)  # type: ignore[misc]
            return append_to_last_user(example.messages, text)

        wanted = [k for k in rewards if verdicts[k].block]
        return ReplayContexts(all=build(None), without={k: build(k) for k in wanted})

    def joint_context(self, example: Example, verdicts: Sequence[Verdict]) -> tuple[list[Message], list[Message]]:
        """Ablation ``mrtpo-joint``: (P_0 + every block, P_0)."""
        return self.replay_contexts(example, verdicts, []).all, copy.deepcopy(example.messages)

    def without_rubric(self, example: Example) -> list[Message]:
        """CoRT's x-: the prompt without its criteria. Tasks whose criteria are in the prompt override."""
        raise NotImplementedError(f"task {self.name!r} does not define a prompt without its rubric (CoRT)")

    def teacher_messages(self, example: Example) -> list[Message]:
        """OPSD's teacher context: the prompt with privileged information (a reference solution)."""
        raise NotImplementedError(f"task {self.name!r} does not define a teacher context (OPSD)")

    # -- provenance -----------------------------------------------------------------------
    @staticmethod
    def data_hash(examples: Sequence[Example]) -> str:
        h = hashlib.sha256()
        for ex in examples:
            h.update(json.dumps(ex.to_json(), sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]
