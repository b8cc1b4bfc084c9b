"""Reference responses for BFCL cases, built from their possible answers (an oracle for checks).

For each possible-answer call the first acceptable value of every parameter is used; a parameter
whose first acceptable value is ``""`` (optional, may be left out) is left out. Java and
JavaScript values are written as strings in the source language's syntax, by the declared type
(``5L`` for a Java long, ``1.5f`` for a Java float, ``new ArrayList<>(Arrays.asList("a"))``,
``new HashMap<String, Object>() {{ put("k", 1); }}``, ``[1, 2]`` and ``{k: "v"}`` in JavaScript).

Used by the differential test and as a sanity check of the evaluator, as an RLLA response
(:func:`gold_response`) or as a BFCL result string (:func:`gold_result`): an oracle should score
close to 100%; the few cases it cannot express, such as Java strings the converter keeps with
their quotes, are reported by the tests.
"""

from __future__ import annotations

import json
from typing import Any

from tasks.toolcall.bfcl_syntax import write_calls
from tasks.toolcall.parsing import ToolCall
from tasks.toolcall.prompts import answer_text


def _first(acceptable: Any, required: bool = False) -> tuple[bool, Any]:
    """(present, value): the first acceptable value, or absent when it is ``""``.

    A required parameter skips a leading ``""`` (a few BFCL answers mark required ones optional).
    """
    if not isinstance(acceptable, list) or not acceptable:
        return (False, None)
    if required:
        acceptable = [a for a in acceptable if a != ""] or [""]
    return (acceptable[0] != "", acceptable[0])


def _plain_dict(value: Any) -> Any:
    """A possible-answer dict ``{key: [acceptable]}`` -> ``{key: first acceptable}`` (others unchanged)."""
    if isinstance(value, dict):
        out = {}
        for key, acceptable in value.items():
            present, v = _first(acceptable)
            if present:
                out[key] = v
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_plain_dict(v) for v in value]
    return value


def _java_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _java(value: Any, declared: str, item_type: str | None) -> str:
    if declared == "boolean" and isinstance(value, bool):
        return "true" if value else "false"
    if declared == "long":
        return f"{value}L"
    if declared == "float":
        return f"{value}f"
    if declared == "Array" and isinstance(value, list):
        elems = ", ".join("true" if v is True else "false" if v is False else str(v) for v in value)
        return f"new {item_type or 'Object'}[]{{{elems}}}"
    if declared == "ArrayList" and isinstance(value, list):
        if not value:
            return "new ArrayList<>()"
        if item_type in ("String", "char"):
            elems = ", ".join(f'"{v}"' for v in value)
        elif item_type == "long":
            elems = ", ".join(f"{v}L" for v in value)
        else:
            elems = ", ".join(_java_literal(v) for v in value)
        return f"new ArrayList<>(Arrays.asList({elems}))"
    if declared == "HashMap" and isinstance(value, dict):
        puts = []
        for key, acceptable in value.items():
            present, v = _first(acceptable)
            if present:
                puts.append(f'put("{key}", {_java_literal(v)});')
        return "new HashMap<String, Object>() {{ " + " ".join(puts) + " }}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _js_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_js_literal(v) for v in value) + "]"
    return str(value)


def _js(value: Any, declared: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "Bigint":
        return f"{value}n"
    if declared == "array" and isinstance(value, list):
        return "[" + ", ".join(_js_literal(v) for v in value) + "]"
    if declared == "dict" and isinstance(value, dict):
        parts = []
        for key, acceptable in value.items():
            present, v = _first(acceptable)
            if present:
                parts.append(f"{key}: {_js_literal(v)}")
        return "{" + ", ".join(parts) + "}"
    return str(value)


def gold_calls(functions: list[dict[str, Any]], answers: list[dict[str, Any]], language: str) -> list[ToolCall]:
    """One call per possible answer, with the first acceptable values, encoded for ``language``."""
    calls = []
    for answer in answers:
        name, params = next(iter(answer.items()))
        doc = next((f for f in functions if f.get("name") == name), {})
        props = doc.get("parameters", {}).get("properties", {})
        required = set(doc.get("parameters", {}).get("required", []))
        args: dict[str, Any] = {}
        for param, acceptable in params.items():
            present, value = _first(acceptable, param in required)
            if not present:
                continue
            schema = props.get(param, {})
            declared = schema.get("type", "any")
            item_type = (schema.get("items") or {}).get("type")
            if language == "java":
                value = _java(value, declared, item_type)
            elif language == "javascript":
                value = _js(value, declared)
            else:
                value = _plain_dict(value)
            args[param] = value
        calls.append(ToolCall(name, args))
    return calls


def gold_response(functions: list[dict[str, Any]], answers: list[dict[str, Any]], language: str) -> str:
    """A full RLLA response making the gold calls."""
    return answer_text("Reference calls for this request.", gold_calls(functions, answers, language))


def gold_result(functions: list[dict[str, Any]], answers: list[dict[str, Any]], language: str) -> str:
    """The gold calls as a BFCL result string, ``[f(a=1, b='x')]`` (:func:`tasks.toolcall.bfcl_syntax.write_calls`)."""
    return write_calls([{c.name: c.parameters} for c in gold_calls(functions, answers, language)], language)
