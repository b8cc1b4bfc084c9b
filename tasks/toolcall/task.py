"""``ToolCallTask``: tool calling in the RLLA format with a format and a correctness reward.

- ``load(split, data_dir=None)``: the built-in demo set (:mod:`tasks.toolcall.demo`); a directory or
  file of ToolRL rows (:mod:`tasks.toolcall.data`); or ``"hub:OWNER/NAME[:SPLIT]"`` to load through
  ``datasets`` (:mod:`tasks.data_source`).
- ``score``: two verdicts, in ``reward_names`` order ``["format", "correctness"]`` (see
  :mod:`tasks.toolcall.rewards` for the formulas and the missing-closing-tag decision).
- Blocks (paper Appendix C): Z_format states the format required for this example's kind;
  Z_correct lists the reference calls (``None`` when the reference makes no call: correctness is
  then constantly 0 and never replayed). Blocks go into P_all correctness first
  (``block_order``), appended to the last user message by the default ``replay_contexts``.
- ``teacher_messages`` (OPSD): system, user, the reference answer as an earlier assistant turn,
  then the user prompt again. There is no rubric in a tool-calling prompt, so ``without_rubric``
  keeps the base ``NotImplementedError``.
"""

from __future__ import annotations

from typing import Any

from mrbench_core.errors import response_text
from tasks.base import DataError, Example, RewardSpec, Task, Verdict
from tasks.data_source import hub_source, read_hub
from tasks.registry import TASKS
from tasks.toolcall import demo, templates
from tasks.toolcall.data import read_rows, row_fields, split_file
from tasks.toolcall.parsing import ToolCall, find_call_block, parse_tool_list
from tasks.toolcall.prompts import calls_block_text
from tasks.toolcall.rewards import (
    MAX_CORRECT,
    MIN_CORRECT,
    answer_kind,
    convert_reference_calls,
    correctness_reward,
    format_reward,
)

REWARD_NAMES = ["format", "correctness"]


@TASKS.register("toolcall")
class ToolCallTask(Task):
    """Tool calling (ToolRL / RLLA recipe): format {0,1} and correctness [-3,3]."""

    version = "1"
    format_reward = "format"
    block_order = ["correctness", "format"]  # noqa: RUF012  (protocol attribute, never mutated)

    # -- data -----------------------------------------------------------------------------------------
    def default_benchmarks(self, data_dir: str | None = None) -> dict[str, str | None]:
        """BFCL-v4, whose data ships with the ``bfcl-eval`` package (works offline)."""
        return {"bfcl-v4": None}

    def load(self, split: str = "train", data_dir: str | None = None) -> list[Example]:
        """Examples of ``split`` ("train" or "test"), in file order."""
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}; known splits: train, test")
        if data_dir is None:
            rows = [r for r in demo.generate() if r["extra_info"]["split"] == split]
            where = "built-in demo set"
        elif (hub := hub_source(data_dir, split)) is not None:
            rows = read_hub(hub)
            where = hub.spec
        else:
            where = split_file(data_dir, split)
            rows = read_rows(where)
        return [self.example_from_row(row, where=where, index=i) for i, row in enumerate(rows)]

    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None,
                         index: int | None = None) -> Example:
        """An RLLA row (ToolRL parquet / SFT JSON / this project's export) -> Example.

        ``meta``: ``ground_truth`` (the reference answer), ``kind``, ``tools`` (schemas parsed from the
        system prompt), ``reference_calls`` (after the Appendix B type conversion).
        """
        ident, messages, truth = row_fields(row, where, index)
        kind = answer_kind(truth)
        reference: list[dict[str, Any]] = []
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        tools = parse_tool_list(system)
        if kind.startswith("tool_call"):
            block = find_call_block(truth)
            if block.calls is None:
                raise DataError(f"reference answer of {ident!r} has a malformed tool call block: {block.error}",
                                path=where or None, row=index)
            reference = [c.to_json() for c in convert_reference_calls(block.calls, tools)]
        meta = {"ground_truth": truth, "kind": kind, "tools": tools, "reference_calls": reference}
        return Example(id=ident, messages=messages, reward_names=list(REWARD_NAMES), meta=meta)

    def reward_specs(self) -> list[RewardSpec]:
        return [
            RewardSpec("format", 0.0, 1.0, "RLLA layout for the reference's kind, each tag exactly once"),
            RewardSpec("correctness", MIN_CORRECT, MAX_CORRECT,
                       "ToolRL partial credit on tool names, parameter names and values"),
        ]

    # -- verifiers ------------------------------------------------------------------------------------------
    def format_block(self, example: Example) -> str:
        return templates.FORMAT_BLOCKS[example.meta["kind"]]

    def correctness_block(self, example: Example) -> str | None:
        calls = _calls(example)
        return calls_block_text(calls) if calls else None

    def score(self, example: Example, response: str) -> list[Verdict]:
        """[format verdict, correctness verdict]. Never raises on ``response``."""
        response = response_text(response)
        fmt = format_reward(response, example.meta["kind"])
        cor = correctness_reward(response, _calls(example))
        return [
            Verdict("format", fmt.value, fmt.reason, self.format_block(example), fmt.spans, fmt.detail),
            Verdict("correctness", cor.value, cor.reason, self.correctness_block(example), cor.spans, cor.detail),
        ]

    # -- contexts ---------------------------------------------------------------------------------------------
    def teacher_messages(self, example: Example) -> list[dict[str, str]]:
        """OPSD: the reference answer shown as an earlier answer to the same prompt, then the prompt again."""
        msgs = [dict(m) for m in example.messages]
        last_user = next(m for m in reversed(msgs) if m["role"] == "user")
        return msgs + [{"role": "assistant", "content": example.meta["ground_truth"]},
                       {"role": "user", "content": templates.TEACHER_REPEAT.format(prompt=last_user["content"])}]


def _calls(example: Example) -> list[ToolCall]:
    """The example's reference calls (already type-converted)."""
    return [ToolCall(c["name"], c["parameters"]) for c in example.meta.get("reference_calls", [])]
