"""BFCL's conversion of Java / JavaScript argument strings into Python values (official semantics).

In the Java and JavaScript categories a model writes every argument as a string in the source
language's syntax; the official checker converts that string by the declared type before
comparing it with the possible answers. These functions reproduce the observed behaviour of
the official converters (bfcl-eval 2026.3.23), including their quirks, because the benchmark's
numbers depend on them:

- a string that does not look like the declared type is kept as the string itself (and then
  usually fails the type check): Java ``integer``/``byte``/``short`` need ``-?digits``, ``long``
  needs an ``L`` suffix, ``float`` an ``f`` suffix, ``double`` plain decimal; JavaScript
  ``integer`` needs ``-?digits``, ``float`` ``-?digits[.digits]`` (no exponent), ``Bigint`` an ``n``
  suffix; booleans are exactly ``true`` / ``false``;
- Java ``char`` is never converted (the official pattern can never match) and ``String`` / ``any``
  are kept verbatim (quotes included);
- JavaScript ``String`` loses one pair of matching outer quotes;
- collections are read with regular expressions: Java ``new T[]{...}``, ``new ArrayList<>(Arrays.asList(...))``,
  ``new ArrayList<>() {{ add(...); }}``, ``new HashMap<>() {{ put("k", v); }}``; JavaScript
  ``[...]`` / ``new Array(...)`` (2-D arrays too) and ``{k: v, ...}``; elements are split at
  every comma (no nesting awareness) exactly as the official code does.
- Java ``Set``, ``Hashtable``, ``Queue`` and ``Stack`` are not convertible (the official code raises);
  here they raise :class:`Unconvertible`, which the checker reports as an invalid answer.

Numbers use Python's own ``int()`` / ``float()`` where the official code does, so their corner
cases (``"1_000"``, ``"inf"``) behave identically.
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPES: dict[str, type] = {
    "byte": int, "short": int, "integer": int, "float": float, "double": float, "long": int,
    "boolean": bool, "char": str, "Array": list, "ArrayList": list, "Set": set, "HashMap": dict,
    "Hashtable": dict, "Queue": list, "Stack": list, "String": str, "any": str,
}
JS_TYPES: dict[str, type] = {
    "String": str, "integer": int, "float": float, "Bigint": int, "Boolean": bool, "dict": dict,
    "array": list, "any": str,
}


class Unconvertible(ValueError):
    """A declared type the official converter cannot handle."""


_DIGITS = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")
_JS_FLOAT = re.compile(r"^-?\d+(\.\d+)?$")
_JS_BIGINT = re.compile(r"^-?\d+n$")


# -- Java ---------------------------------------------------------------------------------------------
def java_value(text: str, declared: str, item_type: str | None = None) -> Any:
    """Convert one Java argument string by its declared type."""
    if declared not in JAVA_TYPES:
        raise Unconvertible(f"unsupported Java type {declared!r}")
    if declared in ("byte", "short", "integer"):
        return int(text) if _DIGITS.match(text) else text
    if declared == "float":
        return float(_drop_suffix(text, "fF")) if _JAVA_FLOAT.match(text) else text
    if declared == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else text
    if declared == "long":
        return int(_drop_suffix(text, "lL")) if _JAVA_LONG.match(text) else text
    if declared == "boolean":
        return text == "true" if text in ("true", "false") else text
    if declared in ("char", "String", "any"):
        return str(text)
    if declared == "Array":
        return _java_array(text, item_type)
    if declared == "ArrayList":
        return _java_arraylist(text, item_type)
    if declared == "HashMap":
        return _java_hashmap(text)
    raise Unconvertible(f"Java type {declared!r} is not convertible")


def java_literal(text: str) -> Any:
    """An untyped Java literal: true/false, "quoted", 12L, 1.5f, then int, float, else the text."""
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(_drop_suffix(text, "fF"))
    return _number_or_text(text)


def _drop_suffix(text: str, letters: str) -> str:
    """Remove a type-suffix letter at the end, or just before one final newline (as ``$`` allows)."""
    return re.sub(f"[{letters}]$", "", text)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _java_element(text: str, item_type: str | None, unquote: bool) -> Any:
    if unquote and item_type in ("char", "String"):
        return text[1:-1]
    return java_value(text, item_type) if item_type else java_literal(text)


def _java_array(text: str, item_type: str | None) -> Any:
    m = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
    if not m:
        return text
    parts = [p.strip() for p in m.group(1).split(",")]
    return [java_value(p, item_type) if item_type else java_literal(p) for p in parts if p]


def _java_arraylist(text: str, item_type: str | None) -> Any:
    m = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if m:
        return [_java_element(p.strip(), item_type, True) for p in m.group(1).split(",")]
    m = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if m:
        return [_java_element(a.strip(), item_type, True) for a in re.findall(r"add\((.+?)\)", m.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _java_hashmap(text: str) -> Any:
    m = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
    if m:
        out: dict[str, Any] = {}
        if m.group(1).strip():
            for key, val in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", m.group(1)):
                out[key] = java_literal(val.strip())
        return out
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", text):
        return {}
    return text


# -- JavaScript ---------------------------------------------------------------------------------------
def js_value(text: str, declared: str, item_type: str | None = None) -> Any:
    """Convert one JavaScript argument string by its declared type."""
    if declared not in JS_TYPES:
        raise Unconvertible(f"unsupported JavaScript type {declared!r}")
    if declared == "String":
        quoted = (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
        return text[1:-1] if quoted else str(text)
    if declared == "integer":
        return int(text) if _DIGITS.match(text) else text
    if declared == "float":
        return float(text) if _JS_FLOAT.match(text) else text
    if declared == "Bigint":
        return int(text[:-1]) if _JS_BIGINT.match(text) else text
    if declared == "Boolean":
        return text == "true" if text in ("true", "false") else text
    if declared == "array":
        return _js_array(text, item_type)
    if declared == "dict":
        return _js_dict(text)
    return str(text)  # any


def js_literal(text: str) -> Any:
    """An untyped JavaScript literal: true/false, quoted (either quote), int, float, else the text."""
    text = text.strip()
    if text == "true":
        return True
    if text == "false":
        return False
    if (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'")):
        return text[1:-1]
    return _number_or_text(text)


_JS_2D = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_1D = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")


def _js_array(text: str, item_type: str | None) -> Any:
    code = text.strip()
    try:
        m2 = _JS_2D.match(code)
        if m2:
            rows = []
            for idx, inner in enumerate(re.findall(r"\[(.*?)\]", m2.group(0))):
                inner = inner.strip()
                if idx == 0 and inner.startswith("["):
                    inner = inner[1:]
                rows.append([js_literal(e.strip()) for e in inner.split(",")])
            return rows
        m1 = _JS_1D.match(code)
        if not m1:
            return code
        body = m1.group(1) if m1.group(1) is not None else m1.group(2)
        body = (body or "").strip()
        parts = body.split(",") if body else []
        if not item_type:
            return [js_literal(p.strip()) for p in parts]
        out = []
        for p in parts:
            p = p.strip()
            inner_item = "String" if p.startswith(("'", '"')) else None
            out.append(js_value(p, item_type, inner_item))
        return out
    except Exception:  # noqa: BLE001  (the official converter falls back to the raw text)
        return code


def _js_dict(text: str) -> Any:
    code = text.strip()
    if code == "{}":
        return {}
    m = re.match(r"\{(.*?)\}", code)
    if not m:
        return code
    try:
        out: dict[str, Any] = {}
        for key, val in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", m.group(1)):
            key = key.strip().strip("'\"")
            val = val.strip()
            if val.startswith("[") and val.endswith("]"):
                out[key] = _js_array(val, None)
            elif val.startswith("{") and val.endswith("}"):
                out[key] = _js_dict(val)
            else:
                out[key] = js_literal(val.strip("'\""))
        return out
    except Exception:  # noqa: BLE001  (as the official converter: keep the text)
        return code
