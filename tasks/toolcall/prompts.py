"""Building RLLA prompts: the system message with the tool list, the user message with the history.

Used by the demo generator and by the BFCL evaluator (which turns each case's function documents
into the same prompt). The wording lives in :mod:`tasks.toolcall.templates`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tasks.toolcall import templates
from tasks.toolcall.parsing import ToolCall

Message = dict[str, str]


def tool_list_text(tools: Iterable[tuple[str, str, Any]]) -> str:
    """Numbered ``Name / Description / Parameters`` entries; parameters as one-line JSON."""
    entries = []
    for i, (name, description, parameters) in enumerate(tools, start=1):
        entries.append(templates.TOOL_ENTRY.format(
            index=i, name=name, description=description,
            parameters=json.dumps(parameters, ensure_ascii=False)))
    return "\n".join(entries)


def system_message(tools: Iterable[tuple[str, str, Any]]) -> Message:
    return {"role": "system", "content": templates.SYSTEM_PROMPT.format(tool_list=tool_list_text(tools))}


def history_message(turns: Sequence[tuple[str, str]]) -> Message:
    """The user message: a header, then one line per turn ``(role, text)`` (roles of ``templates.TURN``).

    Role ``"raw"`` inserts text verbatim (earlier assistant answers already in RLLA tags).
    """
    lines = [templates.HISTORY_HEADER]
    for role, content in turns:
        if role == "raw":
            lines.append(content)
        else:
            lines.append(templates.TURN[role].format(content=content))
    return {"role": "user", "content": "\n".join(lines[:1]) + "\n" + "\n\n".join(lines[1:])}


def answer_text(think: str, calls: Sequence[ToolCall] | None = None, response: str | None = None) -> str:
    """An answer in the RLLA output format (used for reference answers and the demo set)."""
    parts = [f"<think> {think} </think>"]
    if calls:
        parts.append("<tool_call>\n" + "\n".join(c.line() for c in calls) + "\n</tool_call>")
    if response is not None:
        parts.append(f"<response> {response} </response>")
    return "\n".join(parts)


def calls_block_text(calls: Sequence[ToolCall]) -> str:
    """The correctness block Z_correct: the reference calls, one JSON object per line."""
    return templates.CORRECTNESS_BLOCK.format(calls="\n".join(c.line() for c in calls))
