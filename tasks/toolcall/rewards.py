"""The two training rewards of the tool-calling task (ToolRL recipe): format and correctness.

**Format** in {0, 1}. The required pattern depends on the kind of the reference answer:

=====================  ==================================================================
kind                   pattern (anchored at both ends, ``.`` matches newlines)
=====================  ==================================================================
response               ``<think>.*?</think>\\n<response>.*?</response>``
tool_call              ``<think>.*?</think>\\n<tool_call>\\n.*?\\n</tool_call>``
tool_call+response     ``<think>.*?</think>\\n<tool_call>\\n.*?\\n</tool_call>\\n<response>.*?</response>``
think                  ``<think>.*?</think>``
=====================  ==================================================================

and every tag of the pattern occurs exactly once in the response. As in Python's ``$``, one
final newline after the last tag is allowed. The format verifier reads the tags: its spans
are every RLLA tag occurrence in the response.

**Correctness** in [-3, 3]:

- 0 when the reference makes no tool call, whatever the response (the verifier reads nothing);
- -3 when the response has no complete ``<tool_call> ... </tool_call>`` block or the block does
  not parse (see :mod:`tasks.toolcall.parsing`: a missing closing tag means no block, so a
  correct call without ``</tool_call>`` scores -3);
- +3 when the predicted call list equals the reference list (same order, Python equality);
- otherwise ``R = 6 * score / local_max - 3`` with
  ``score = IoU(names) + sum over reference calls g matched to an unused predicted call p of the
  same name (the best one, first on ties, only if its match score is > 0) of
  [IoU(param names of g, of p) + #{k in g : p[k] == g[k]}]``,
  ``local_max = 1 + sum over reference calls of (1 + number of its parameters)``,
  and ``IoU(a, b) = |a ∩ b| / (|a| + |b| - |a ∩ b|)`` on multisets (1 if a == b as lists, 0 if
  one is empty). Values compare with Python equality (5 == 5.0; "1" != 1; case matters).

Reference values written as numeric or boolean strings are converted to the type the tool
schema declares (paper Appendix B): ``"1"`` for an ``int`` parameter becomes 1, ``"true"`` for a
``bool`` parameter becomes True. Predicted values are never converted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tasks.toolcall.parsing import TAGS, ToolCall, answer_start, find_call_block, tag_spans

MIN_CORRECT, MAX_CORRECT = -3.0, 3.0

_P = {
    "think": r"<think>.*?</think>",
    "call": r"<tool_call>\n.*?\n</tool_call>",
    "resp": r"<response>.*?</response>",
}
FORMAT_PATTERNS: dict[str, re.Pattern[str]] = {
    "response": re.compile(rf"\A{_P['think']}\n{_P['resp']}\n?\Z", re.DOTALL),
    "tool_call": re.compile(rf"\A{_P['think']}\n{_P['call']}\n?\Z", re.DOTALL),
    "tool_call+response": re.compile(rf"\A{_P['think']}\n{_P['call']}\n{_P['resp']}\n?\Z", re.DOTALL),
    "think": re.compile(rf"\A{_P['think']}\n?\Z", re.DOTALL),
}
FORMAT_TAGS: dict[str, tuple[str, ...]] = {
    "response": ("<think>", "</think>", "<response>", "</response>"),
    "tool_call": ("<think>", "</think>", "<tool_call>", "</tool_call>"),
    "tool_call+response": TAGS,
    "think": ("<think>", "</think>"),
}


def answer_kind(reference: str) -> str:
    """The kind of a reference answer: tool_call+response, tool_call, response or think.

    Only the part after the last ``</think>`` counts (a long think may mention the tags).
    """
    body = reference[answer_start(reference):]
    has_call, has_resp = "<tool_call>" in body, "<response>" in body
    if has_call and has_resp:
        return "tool_call+response"
    if has_call:
        return "tool_call"
    if has_resp:
        return "response"
    return "think"


@dataclass
class RewardResult:
    value: float
    reason: str
    spans: list[tuple[int, int]] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


def format_reward(response: str, kind: str) -> RewardResult:
    """1 if ``response`` has the layout required for ``kind`` with each of its tags once, else 0."""
    if not isinstance(response, str):
        return RewardResult(0.0, "response is not text", [], {"kind": kind})
    spans_by_tag = tag_spans(response)
    spans = sorted(s for v in spans_by_tag.values() for s in v)
    counts = {t: len(spans_by_tag[t]) for t in FORMAT_TAGS[kind]}
    bad_counts = {t: c for t, c in counts.items() if c != 1}
    layout_ok = FORMAT_PATTERNS[kind].match(response) is not None
    detail = {"kind": kind, "tag_counts": counts, "layout_ok": layout_ok}
    if bad_counts:
        why = ", ".join(f"{t} x{c}" for t, c in bad_counts.items())
        return RewardResult(0.0, f"each tag must occur exactly once ({why})", spans, detail)
    if not layout_ok:
        return RewardResult(0.0, f"tags are not laid out as required for a {kind} answer", spans, detail)
    return RewardResult(1.0, f"valid {kind} format", spans, detail)


# -- reference values ------------------------------------------------------------------------------
_INT_TYPES = {"int", "integer", "long", "short", "byte"}
_FLOAT_TYPES = {"float", "number", "double"}
_BOOL_TYPES = {"bool", "boolean"}
_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def declared_base_type(schema: Any) -> str:
    """``{"type": "int, optional"}`` -> ``"int"`` (lower case); "" when undeclared."""
    if not isinstance(schema, dict) or not isinstance(schema.get("type"), str):
        return ""
    return schema["type"].split(",")[0].strip().lower()


def convert_reference_value(value: Any, declared: str) -> Any:
    """Appendix B: a numeric or boolean string becomes the declared int / float / bool."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if declared in _INT_TYPES and _INT_RE.fullmatch(text):
        return int(text)
    if declared in _FLOAT_TYPES and _FLOAT_RE.fullmatch(text):
        return float(text)
    if declared in _BOOL_TYPES and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return value


def convert_reference_calls(calls: Sequence[ToolCall], tools: dict[str, dict[str, Any]]) -> list[ToolCall]:
    """Apply :func:`convert_reference_value` to each top-level argument, by the tool's schema."""
    out = []
    for call in calls:
        schema = tools.get(call.name, {})
        params = {k: convert_reference_value(v, declared_base_type(schema.get(k))) for k, v in call.parameters.items()}
        out.append(ToolCall(call.name, params))
    return out


# -- correctness ---------------------------------------------------------------------------------------
def multiset_iou(a: Sequence[str], b: Sequence[str]) -> float:
    """|a ∩ b| / (|a| + |b| - |a ∩ b|) on multisets; 1 if a == b as lists; 0 if either is empty."""
    if list(a) == list(b):
        return 1.0
    if not a or not b:
        return 0.0
    inter = sum((Counter(a) & Counter(b)).values())
    return inter / (len(a) + len(b) - inter)


def call_match_score(gold: ToolCall, pred: ToolCall) -> tuple[float, int]:
    """(IoU of parameter names + number of equal values, number of equal values)."""
    same = sum(1 for k, v in gold.parameters.items() if k in pred.parameters and pred.parameters[k] == v)
    return multiset_iou(list(gold.parameters), list(pred.parameters)) + same, same


def correctness_score(gold: Sequence[ToolCall], pred: Sequence[ToolCall]) -> tuple[float, dict[str, Any]]:
    """The ToolRL partial-credit formula (module docstring) -> (R in [-3, 3], detail)."""
    if [c.to_json() for c in gold] == [c.to_json() for c in pred]:
        return MAX_CORRECT, {"exact": True}
    score = multiset_iou([c.name for c in gold], [c.name for c in pred])
    name_iou = score
    local_max = 1.0
    used: set[int] = set()
    matches = []
    for gi, g in enumerate(gold):
        local_max += 1.0 + len(g.parameters)
        best, best_i = 0.0, -1
        for pi, p in enumerate(pred):
            if pi in used or p.name != g.name:
                continue
            s, _ = call_match_score(g, p)
            if s > best:
                best, best_i = s, pi
        if best_i >= 0:
            used.add(best_i)
            score += best
            matches.append({"reference": gi, "predicted": best_i, "score": best})
    value = (MAX_CORRECT - MIN_CORRECT) * score / local_max + MIN_CORRECT
    value = min(MAX_CORRECT, max(MIN_CORRECT, value))
    return value, {"exact": False, "name_iou": name_iou, "score": score, "local_max": local_max,
                   "matches": matches}


def correctness_reward(response: str, gold: Sequence[ToolCall] | None) -> RewardResult:
    """Correctness of ``response`` against the reference calls (``None``/empty: no call expected)."""
    if not gold:
        return RewardResult(0.0, "the reference makes no tool call: correctness does not apply (0)", [],
                            {"reference_calls": []})
    ref_json = [c.to_json() for c in gold]
    block = find_call_block(response)
    if block.calls is None:
        spans = [block.span] if block.span else []
        return RewardResult(MIN_CORRECT, f"no parsable tool call: {block.error}", spans,
                            {"reference_calls": ref_json, "predicted_calls": None, "parse_error": block.error})
    spans = [block.span] if block.span else []
    try:
        value, info = correctness_score(gold, block.calls)
    except (RecursionError, TypeError, ValueError) as exc:  # pathological values; never raise
        return RewardResult(MIN_CORRECT, f"calls could not be compared ({type(exc).__name__})", spans,
                            {"reference_calls": ref_json})
    pred_json = [c.to_json() for c in block.calls]
    reason = "exact match of the reference calls" if info["exact"] else (
        f"partial match: score {info['score']:.3f} of {info['local_max']:.0f}")
    return RewardResult(value, reason, spans, {"reference_calls": ref_json, "predicted_calls": pred_json, **info})
