"""BFCL's own answer syntax, as its result files hold it, decoded into the checker's call shape.

A model prompted the BFCL way answers with its calls as text, ``[get_weather(city="Paris")]``;
BFCL result files (rows ``{"id": ..., "result": ...}``) keep that text, or, for a model with
native function calling, the decoded list ``[{"get_weather": {"city": "Paris"}}]`` (the arguments
sometimes a JSON string). :func:`decode_result` turns any of these into
``[{name: {param: value}}, ...]`` for :func:`tasks.toolcall.bfcl_checker.check`. It never raises on
model output: a result it cannot read is ``(None, why)``.

Text in a Python category: spaces, newlines and backticks around it are dropped, then quotes
wrapping the whole text, and the brackets are optional. The text is read with Python's parser;
every element must be a call to a (possibly dotted) name. Only keyword arguments are read (BFCL
ignores positional ones). Values: literals as Python reads them; a signed number; arithmetic on
number or string literals, computed; a bare name as its name (BFCL's "variable"); a call with
keyword arguments as ``{name: {param: value}}``; anything else as its source text.

Text in a Java or JavaScript category: ``[name(param=value, ...), ...]`` where each value is kept
as its source text in that language (``5L``, ``new ArrayList<>(Arrays.asList("a"))``, ``[1, 2]``)
except that a value which is one string literal loses its quotes (no unescaping). The checker
converts these strings by the declared type (:mod:`tasks.toolcall.bfcl_convert`).

A result given as JSON text of the list form (as ``mrbench eval`` passes list results on) is read
as the list form. :func:`write_calls` writes calls back in the text form (used to build reference
result files).
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable
from typing import Any

Calls = list[dict[str, dict[str, Any]]]

_NAME = r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*"
_CALL = re.compile(rf"^({_NAME})\s*\((.*)\)$", re.DOTALL)
_KEYWORD = re.compile(r"^\s*([A-Za-z_$][\w$]*)\s*=(?![=>])(.*)$", re.DOTALL)
_QUOTES = "\"'`"
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_GENERIC_CHARS = re.compile(r"[\w\s,.?$\[\]]")
_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def decode_result(result: Any, language: str) -> tuple[Calls | None, str]:
    """A BFCL result (text or list form) -> (calls, "") or (None, why it could not be read)."""
    try:
        if isinstance(result, str):
            listed = _json_list(result)
            if listed is not None:
                return _decode_list(listed)
            if language in ("java", "javascript"):
                return _decode_source_text(result)
            return _decode_python_text(result)
        if isinstance(result, list):
            return _decode_list(result)
        return None, f"a result must be text or a list of calls, got {type(result).__name__}"
    except (RecursionError, MemoryError, ValueError, TypeError, SyntaxError) as exc:
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def _json_list(text: str) -> list[Any] | None:
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


def _decode_list(items: list[Any]) -> tuple[Calls | None, str]:
    """``[{name: {params}}]`` or ``[{name: "<JSON params>"}]``."""
    calls: Calls = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or len(item) != 1:
            return None, f"call {i} is not a one-entry object {{name: arguments}}"
        name, params = next(iter(item.items()))
        if isinstance(params, str):
            try:
                params = json.loads(params)
            except ValueError:
                return None, f"call {i} ({name}): arguments are not valid JSON"
        if not isinstance(params, dict):
            return None, f"call {i} ({name}): arguments are not an object"
        calls.append({str(name): params})
    return calls, ""


def _strip_wrapping(text: str) -> str:
    return text.strip("`\n\r\t ").strip("'").strip()


# -- Python ---------------------------------------------------------------------------------------------
def _decode_python_text(text: str) -> tuple[Calls | None, str]:
    body = _strip_wrapping(text)
    if not body:
        return None, "empty result"
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as exc:
        return None, f"not Python call syntax: {exc.msg}"
    elements = tree.body.elts if isinstance(tree.body, (ast.List, ast.Tuple)) else [tree.body]
    calls: Calls = []
    for i, element in enumerate(elements):
        name = _dotted_name(element.func) if isinstance(element, ast.Call) else None
        if name is None:
            return None, f"element {i} is not a call to a named function"
        calls.append({name: _keyword_values(element)})
    return calls, ""


def _dotted_name(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _keyword_values(call: ast.Call) -> dict[str, Any]:
    return {kw.arg: python_value(kw.value) for kw in call.keywords if kw.arg is not None}


def python_value(node: ast.AST) -> Any:
    """One argument's value (module docstring)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.List):
        return [python_value(e) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(python_value(e) for e in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:
        try:
            return {python_value(k): python_value(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
        except TypeError:  # an unhashable key
            return ast.unparse(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = python_value(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        computed = _arithmetic(node)
        if computed is not None:
            return computed
    if isinstance(node, ast.Call) and node.keywords:
        name = _dotted_name(node.func)
        if name is not None:
            return {name: _keyword_values(node)}
    return ast.unparse(node)


def _arithmetic(node: ast.BinOp) -> Any:
    """Arithmetic on number literals (or ``+`` on strings), else None. Large powers are not computed."""
    op = _ARITHMETIC.get(type(node.op))
    left, right = python_value(node.left), python_value(node.right)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
    if op is None or not (numbers or (isinstance(node.op, ast.Add) and isinstance(left, str)
                                      and isinstance(right, str))):
        return None
    if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 10**6):
        return None
    try:
        return op(left, right)
    except (ArithmeticError, ValueError):
        return None


# -- Java / JavaScript --------------------------------------------------------------------------------------
def _decode_source_text(text: str) -> tuple[Calls | None, str]:
    body = _strip_wrapping(text)
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    items = split_top_level(body)
    if items is None:
        return None, "unbalanced brackets or quotes"
    calls: Calls = []
    for i, item in enumerate(p.strip() for p in items):
        match = _CALL.match(item)
        if not match:
            return None, f"element {i} is not a call name(param=value, ...)"
        args = split_top_level(match.group(2))
        if args is None:
            return None, f"element {i}: unbalanced brackets or quotes in the arguments"
        params: dict[str, Any] = {}
        for arg in (a for a in args if a.strip()):
            keyword = _KEYWORD.match(arg)
            if not keyword or not keyword.group(2).strip():
                return None, f"element {i}: argument {arg.strip()[:40]!r} is not param=value"
            if keyword.group(1) in params:
                return None, f"element {i}: parameter {keyword.group(1)!r} given twice"
            params[keyword.group(1)] = _unquote(keyword.group(2).strip())
        calls.append({match.group(1): params})
    return calls, ""


def _string_end(text: str, start: int) -> int | None:
    """Index of the quote closing the literal opened at ``start`` (backslash escapes), or None."""
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i
        i += 1
    return None


def _generic_end(text: str, start: int) -> int | None:
    """For ``<`` right after a name (``ArrayList<>``, ``HashMap<String, Object>``): its ``>``, else None."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return i
        elif not _GENERIC_CHARS.match(ch):
            return None
        i += 1
    return None


def split_top_level(text: str) -> list[str] | None:
    """Split at commas outside brackets, generics and string literals; None if they do not balance."""
    parts: list[str] = []
    expected: list[str] = []
    start = i = 0
    while i < len(text):
        ch = text[i]
        if ch in _QUOTES:
            end = _string_end(text, i)
            if end is None:
                return None
            i = end
        elif ch == "<" and i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_$"):
            i = _generic_end(text, i) or i
        elif ch in _CLOSERS:
            expected.append(_CLOSERS[ch])
        elif ch in ")]}":
            if not expected or expected.pop() != ch:
                return None
        elif ch == "," and not expected:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if expected:
        return None
    parts.append(text[start:])
    return parts if any(p.strip() for p in parts) else []


def _unquote(value: str) -> str:
    if value[0] in _QUOTES and _string_end(value, 0) == len(value) - 1:
        return value[1:-1]
    return value


# -- writing --------------------------------------------------------------------------------------------
def write_calls(calls: Calls, language: str) -> str:
    """Calls as BFCL result text: Python values by ``repr``; Java/JavaScript values (source-text
    strings) quoted when they hold no double quote, else written as they are."""
    texts = []
    for call in calls:
        name, params = next(iter(call.items()))
        if language in ("java", "javascript"):
            args = [f"{k}={_source_value(v)}" for k, v in params.items()]
        else:
            args = [f"{k}={v!r}" for k, v in params.items()]
        texts.append(f"{name}({', '.join(args)})")
    return "[" + ", ".join(texts) + "]"


def _source_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if '"' in text else f'"{text}"'
