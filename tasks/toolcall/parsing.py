"""Reading the RLLA text format: tags of a response, its tool-call block, and the tool list of a prompt.

A response looks like::

    <think> ... </think>
    <tool_call>
    {"name": "f", "parameters": {"x": 1}}
    </tool_call>
    <response> ... </response>

Decisions (shared by the training rewards and the BFCL decoder):

- The call block is the text between the first ``<tool_call>`` and the first ``</tool_call>``
  after it, searched for after the last ``</think>`` when the text has one (a think that
  mentions the tags, as the long reasoning of ToolRL's SFT file does, is not an answer). **A block without its closing tag is no block**: the response then has no
  parsable call (correctness -3, and BFCL counts it as "no call decoded"). This follows the
  public ToolRL reward code (default flags), which also gives such a response format 0.
- Each non-blank line of the block must be one JSON object with a string ``"name"`` and an
  object ``"parameters"``; any other line makes the whole block unparsable. An empty block
  decodes to zero calls.
- Nothing here raises on model text: failures come back as a reason string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TAGS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<response>", "</response>")
OPEN_CALL, CLOSE_CALL = "<tool_call>", "</tool_call>"


@dataclass
class ToolCall:
    name: str
    parameters: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "parameters": self.parameters}

    def line(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False)


@dataclass
class CallBlock:
    """The outcome of looking for a tool-call block in a text.

    ``found``: an opening and a closing tag exist. ``calls``: decoded calls, or None when the block
    is missing or unparsable (``error`` says why). ``span``: [start, end) of the block, tags included.
    """

    found: bool
    calls: list[ToolCall] | None
    error: str = ""
    span: tuple[int, int] | None = None


def tag_spans(text: str) -> dict[str, list[tuple[int, int]]]:
    """Every occurrence of each RLLA tag as [start, end) character spans."""
    out: dict[str, list[tuple[int, int]]] = {}
    for tag in TAGS:
        spans = []
        start = text.find(tag)
        while start != -1:
            spans.append((start, start + len(tag)))
            start = text.find(tag, start + len(tag))
        out[tag] = spans
    return out


def parse_call_line(line: str) -> tuple[ToolCall | None, str]:
    """One JSON call line -> (call, "") or (None, reason)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return None, f"line is not JSON ({type(exc).__name__}: {str(exc)[:80]})"
    if not isinstance(obj, dict):
        return None, f"line is JSON {type(obj).__name__}, not an object"
    name, params = obj.get("name"), obj.get("parameters")
    if not isinstance(name, str):
        return None, 'call has no string "name"'
    if not isinstance(params, dict):
        return None, 'call has no object "parameters"'
    return ToolCall(name, params), ""


def find_call_block(text: str) -> CallBlock:
    """Locate and decode the first ``<tool_call> ... </tool_call>`` block of ``text``."""
    if not isinstance(text, str):
        return CallBlock(False, None, "response is not text")
    start = text.find(OPEN_CALL, answer_start(text))
    if start == -1:
        return CallBlock(False, None, "no <tool_call> block")
    end = text.find(CLOSE_CALL, start + len(OPEN_CALL))
    if end == -1:
        return CallBlock(False, None, "<tool_call> is never closed by </tool_call>")
    span = (start, end + len(CLOSE_CALL))
    body = text[start + len(OPEN_CALL):end]
    lines = [ln.strip() for ln in body.split("\n") if ln.strip()]
    calls: list[ToolCall] = []
    for i, line in enumerate(lines):
        call, why = parse_call_line(line)
        if call is None:
            return CallBlock(True, None, f"call line {i + 1}: {why}", span)
        calls.append(call)
    return CallBlock(True, calls, "", span)


def answer_start(text: str) -> int:
    """Where the answer part begins: just after the last ``</think>``, or 0 without one."""
    end = text.rfind("</think>")
    return 0 if end == -1 else end + len("</think>")


# -- the tool list of an RLLA system prompt ------------------------------------------------------
_TOOL_RE = re.compile(
    r"^\d+\.\s*Name:\s*(?P<name>.*?)\s*\n\s*Description:(?P<desc>.*?)\n\s*Parameters:\s*(?P<params>.*?)\s*$",
    re.MULTILINE,
)


def parse_tool_list(system_prompt: str) -> dict[str, dict[str, Any]]:
    """Tools listed in an RLLA system prompt: name -> parameter schema (a dict, possibly empty).

    A tool whose ``Parameters:`` line is not a JSON object gets ``{}`` (its reference values are
    then left as written). The first tool of a repeated name wins.
    """
    tools: dict[str, dict[str, Any]] = {}
    for m in _TOOL_RE.finditer(system_prompt or ""):
        name = m.group("name")
        try:
            params = json.loads(m.group("params"))
        except ValueError:
            params = {}
        if not isinstance(params, dict):
            params = {}
        tools.setdefault(name, params)
    return tools
