"""RLLA prompts for BFCL cases, and decoding a response into BFCL's call shape.

Prompt decisions:

- Each function document becomes one tool entry: name, description, and its parameter
  ``properties`` as JSON, with ``", optional"`` appended to the type of every parameter the
  document does not list as required (the RLLA convention the training data uses).
- Java / JavaScript cases: as in the official prompting, every parameter is declared as
  ``string`` and its description says which source-language type to write there (the checker
  converts the string back); the function description names the language.
- The question's turns go into the user message as the dialogue history; a system message of
  a live case becomes a ``<system>`` line of that history, an assistant turn a ``<response>`` line.

Decoding: the response's tool-call block (:func:`tasks.toolcall.parsing.find_call_block`, the same
reader the training reward uses) becomes ``[{name: parameters}, ...]``. No complete block, or a
block that does not parse, is a decoding failure.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from tasks.toolcall.parsing import find_call_block
from tasks.toolcall.prompts import history_message, system_message

LANGUAGE_NOTES = {
    "java": " (Java 8 SDK function: write each argument as a string of Java code.)",
    "javascript": " (JavaScript function: write each argument as a string of JavaScript code.)",
    "python": "",
}


def _param_entry(schema: dict[str, Any], language: str, optional: bool) -> dict[str, Any]:
    entry = copy.deepcopy(schema)
    declared = str(entry.get("type", "any"))
    if language in ("java", "javascript"):
        lang = "Java" if language == "java" else "JavaScript"
        note = f" Give a {lang} value of type {declared}, written as a string."
        if declared == "any":
            note = f" Give any {lang} value, written as a string."
        items = entry.pop("items", None)
        if isinstance(items, dict) and "type" in items:
            note += f" Its elements are of type {items['type']} (not strings themselves)."
        nested = entry.pop("properties", None) if language == "javascript" and declared == "dict" else None
        if nested:
            note += f" Its entries follow this schema: {json.dumps(nested, ensure_ascii=False)}."
        entry["description"] = str(entry.get("description", "")) + note
        declared = "string"
    entry["type"] = f"{declared}, optional" if optional else declared
    return entry


def tool_entries(functions: list[dict[str, Any]], language: str) -> list[tuple[str, str, Any]]:
    """(name, description, parameters) per BFCL function document, for the RLLA tool list."""
    out = []
    for fn in functions:
        params = fn.get("parameters", {}) or {}
        required = set(params.get("required", []) or [])
        props = {name: _param_entry(schema, language, name not in required)
                 for name, schema in (params.get("properties", {}) or {}).items()}
        out.append((fn["name"], str(fn.get("description", "")) + LANGUAGE_NOTES[language], props))
    return out


def case_messages(question: list[Any], functions: list[dict[str, Any]], language: str) -> list[dict[str, str]]:
    """The RLLA chat messages of one BFCL case."""
    turns = []
    for turn in question:
        for msg in turn if isinstance(turn, list) else [turn]:
            role = msg.get("role", "user")
            turns.append((role if role in ("user", "assistant", "system") else "user", str(msg.get("content", ""))))
    return [system_message(tool_entries(functions, language)), history_message(turns)]


def decode_calls(response: Any) -> tuple[list[dict[str, Any]] | None, str]:
    """Response text -> (``[{name: params}, ...]``, "") or (None, why decoding failed)."""
    block = find_call_block(response if isinstance(response, str) else "")
    if block.calls is None:
        return None, block.error
    return [{c.name: c.parameters} for c in block.calls], ""
