"""The instruction-following task (``ifollow``): one binary reward per constraint.

Examples. ``messages = [user: prompt]``; ``meta`` holds ``constraints`` ([id, kwargs] in prompt
order), ``base`` (the request without constraints, or None), ``sentences`` (each constraint's
text in the prompt, or None), ``prompt``, ``source`` and ``hir_q_type`` (HiR's template for
HIR-16K rows, else None). ``reward_names`` = ``"c{k}:{id}"``
(position k, constraint type), so K varies per example (the backend NaN-pads).

Data. ``load(data_dir=None)``: the project's generated prompts (:mod:`tasks.ifollow.generator`;
5-7 constraints by default, deterministic in the run seed and ``limit`` of them, a
:class:`tasks.data_source.Generated` pool; the ``train``, ``dev``/``validation`` and
``test`` splits draw the named streams ``train-prompts``, ``dev-prompts`` and ``heldout-prompts`` of
:mod:`mrbench_core.seeds`, so no seed's training prompts are another seed's held-out prompts).
``data_dir`` a folder/file: HIR-16K JSONL rows (:mod:`tasks.ifollow.hir`: type1 rows scored with
IFEval's checkers, type2 rows with IFBench's, as HiR's reward code does);
``data_dir="hub:sastpg/HIR-16K"``: the hub (needs access).

Rewards. Strict IFEval checking by default (``loose=True`` gives IFEval's loose variant);
no format reward. A verdict's ``block`` is the constraint's text in the prompt (None when the
text is not known: that reward then keeps the uniform token assignment), its ``spans`` the
characters of the response the checker read.

Contexts. The information is in the prompt itself: P_all = the prompt (messages unchanged);
P_\\k = the same template with constraint k's sentence left out (:mod:`tasks.ifollow.template`;
for HIR-16K rows, HiR's own template without criterion k, :mod:`tasks.ifollow.hir_template`);
CoRT's prompt without rubric = the base request; the joint ablation = (prompt, base request).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mrbench_core.errors import response_text
from mrbench_core.replay_kinds import ReplayRequest
from mrbench_core.seeds import DEV_PROMPTS, HELDOUT_PROMPTS, TRAIN_PROMPTS
from tasks.base import DataError, Example, Message, ReplayContexts, RewardSpec, Task, Verdict
from tasks.data_source import Generated, Pool, hub_source, read_hub
from tasks.ifollow.constraints import check
from tasks.ifollow.rows import parse_official, prompt_of
from tasks.ifollow.template import ConstrainedPrompt, without_all, without_constraint
from tasks.registry import TASKS

SPLIT_STREAMS = {"train": TRAIN_PROMPTS, "dev": DEV_PROMPTS, "validation": DEV_PROMPTS, "test": HELDOUT_PROMPTS}
DEFAULT_SIZE = 2000


def reward_name(k: int, cid: str) -> str:
    return f"c{k}:{cid}"


@TASKS.register("ifollow")
class InstructionFollowingTask(Task):
    """Multi-constraint instruction following; every constraint is a binary reward."""

    version = "2"
    format_reward = None

    def __init__(self, min_constraints: int = 5, max_constraints: int = 7, loose: bool = False,
                 default_size: int = DEFAULT_SIZE):
        if not 1 <= min_constraints <= max_constraints:
            raise ValueError(f"need 1 <= min_constraints <= max_constraints, got {min_constraints}, {max_constraints}")
        self.min_constraints = min_constraints
        self.max_constraints = max_constraints
        self.loose = loose
        self.default_size = default_size

    def reward_family(self, reward: str) -> str:
        """``c3:punctuation:no_comma`` -> ``punctuation:no_comma`` (metrics aggregate by constraint type)."""
        head, sep, rest = reward.partition(":")
        return rest if sep and head[:1] == "c" and head[1:].isdigit() else reward

    @classmethod
    def report_group(cls, family: str) -> str:
        """``punctuation:no_comma`` -> ``punctuation``: the report draws one curve per constraint group."""
        return family.partition(":")[0]

    # -- data -----------------------------------------------------------------------------
    def default_benchmarks(self, data_dir: str | None = None) -> dict[str, str | None]:
        """Held-out generated prompts: no data files needed."""
        return {"ifollow-heldout": None}

    def load(self, split: str = "train", data_dir: str | None = None) -> Pool[Example]:
        """Generated prompts (``data_dir=None``: the split's stream, ``default_size`` of them unless
        the run's ``limit`` says how many), or HIR-16K rows from a local file or folder or the hub."""
        if data_dir is None:
            if split not in SPLIT_STREAMS:
                raise ValueError(f"unknown split {split!r} for generated prompts (known: {', '.join(SPLIT_STREAMS)})")
            return Generated(self._generated(SPLIT_STREAMS[split]), self.default_size)
        from tasks.ifollow import hir

        if (hub := hub_source(data_dir, split)) is not None:
            items = hir.parse_rows(enumerate(read_hub(hub)), where=hub.spec)
        else:
            items = hir.load_local(data_dir)
        return [self.example_from_prompt(item) for item in items]

    def _generated(self, purpose: str) -> Callable[[int, int], Example]:
        from tasks.ifollow.generator import generate_prompt

        def make(i: int, seed: int) -> Example:
            return self.example_from_prompt(generate_prompt(i, seed, self.min_constraints, self.max_constraints,
                                                            purpose))
        return make

    def example_from_prompt(self, item: ConstrainedPrompt) -> Example:
        constraints = [[cid, dict(kw)] for cid, kw in item.constraints]
        sentences = list(item.sentences) + [None] * (len(constraints) - len(item.sentences))
        return Example(
            id=item.id,
            messages=[{"role": "user", "content": item.prompt}],
            reward_names=[reward_name(k, cid) for k, (cid, _) in enumerate(constraints)],
            meta={"constraints": constraints, "base": item.base, "sentences": sentences, "prompt": item.prompt,
                  "source": item.source, "hir_q_type": item.hir_q_type},
        )

    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None) -> Example:
        """A row in the official form: ``prompt``, ``instruction_id_list``, ``kwargs`` (+ ``key``/``id``)."""
        path = where or None
        if not isinstance(row, dict):
            raise DataError("row must be a JSON object", path=path)
        prompt = prompt_of(row, path=path, row_no=None)
        constraints = parse_official(row, path=path, row_no=None)
        key = row.get("key", row.get("id", ""))
        base = row.get("base") if isinstance(row.get("base"), str) else None
        item = ConstrainedPrompt(id=str(key), base=base, constraints=constraints,
                                 sentences=[None] * len(constraints), prompt=prompt, source="row")
        return self.example_from_prompt(item)

    def reward_specs(self) -> list[RewardSpec]:
        return [RewardSpec("c{k}:{constraint id}", 0.0, 1.0, "1 if constraint k of the prompt is satisfied, else 0")]

    def reward_range(self, name: str) -> tuple[float, float] | None:
        """Every constraint reward is binary."""
        return 0.0, 1.0

    # -- verifiers ------------------------------------------------------------------------
    def warm_up(self) -> None:
        """The Punkt sentence splitter, the Treebank word tokenizer and langdetect's profiles,
        which the first checks that count sentences or words or detect a language would load."""
        from tasks.ifollow import textutil

        textutil.warm_up()

    def score(self, example: Example, response: str) -> list[Verdict]:
        prompt = example.meta.get("prompt") or example.messages[-1]["content"]
        sentences = example.meta.get("sentences") or []
        out = []
        for k, (cid, kw) in enumerate(example.meta["constraints"]):
            result = check(cid, response_text(response), kw, loose=self.loose, prompt=prompt)
            block = sentences[k] if k < len(sentences) else None
            out.append(Verdict(reward=reward_name(k, cid), value=1.0 if result.ok else 0.0, reason=result.reason,
                               block=block, spans=list(result.spans),
                               detail={"id": cid, "kwargs": kw, "loose": self.loose}))
        return out

    # -- contexts -------------------------------------------------------------------------
    @staticmethod
    def _item(example: Example) -> ConstrainedPrompt:
        meta = example.meta
        return ConstrainedPrompt(id=example.id, base=meta.get("base"),
                                 constraints=[(c, kw) for c, kw in meta["constraints"]],
                                 sentences=list(meta.get("sentences") or []),
                                 prompt=meta.get("prompt") or example.messages[-1]["content"],
                                 hir_q_type=meta.get("hir_q_type"))

    @staticmethod
    def _with_user_text(example: Example, text: str) -> list[Message]:
        messages = copy.deepcopy(example.messages)
        for msg in reversed(messages):
            if msg.get("role") == "user":
                msg["content"] = text
                return messages
        raise ValueError(f"example {example.id!r} has no user turn")

    def supported_replays(self) -> set[ReplayRequest]:
        """Every kind but SDPO's feedback: the verifiers' blocks are the prompt's own constraint
        sentences, so a self-teacher conditioned on them would be the student (no signal)."""
        return super().supported_replays() - {ReplayRequest.FEEDBACK}

    def replay_contexts(self, example: Example, verdicts: Sequence[Verdict], rewards: Iterable[int]) -> ReplayContexts:
        """P_all = the prompt itself; P_\\k = the template without constraint k (only its text goes).

        Constraints whose text in the prompt is unknown are not replayed (left out of ``without``).
        """
        item = self._item(example)
        without: dict[int, list[Message]] = {}
        for k in rewards:
            text = without_constraint(item, k)
            if text is not None:
                without[k] = self._with_user_text(example, text)
        return ReplayContexts(all=copy.deepcopy(example.messages), without=without)

    def without_rubric(self, example: Example) -> list[Message]:
        """CoRT's x-: the base request without any constraint."""
        return self._with_user_text(example, without_all(self._item(example)))

    def joint_context(self, example: Example, verdicts: Sequence[Verdict]) -> tuple[list[Message], list[Message]]:
        """(the prompt, the base request alone)."""
        return copy.deepcopy(example.messages), self.without_rubric(example)
