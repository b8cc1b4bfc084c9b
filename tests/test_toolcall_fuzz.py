"""Hypothesis fuzzing: 10,000 arbitrary and near-miss responses never raise and stay in range.

Each generated batch holds 40 responses (250 batches): arbitrary unicode text, tag soups built
from RLLA pieces and JSON call lines with arbitrary values, and near misses obtained by editing
reference answers (deleting spans, inserting tags or JSON fragments). Each response is scored
against demo examples of every kind (single, parallel, no-call, ...) and, for the decoder, BFCL
cases of every category shape.
"""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from evals.base import EvalCase
from evals.bfcl import score_case
from tasks.toolcall.task import ToolCallTask

TASK = ToolCallTask()
DEMO = TASK.load("train")
BY_KIND = {}
for ex in DEMO:
    BY_KIND.setdefault((ex.meta["kind"], len(ex.meta["reference_calls"])), ex)
EXAMPLES = list(BY_KIND.values())
BATCH, BATCHES = 40, 250

FUNCTION = {"name": "f", "description": "d", "parameters": {"type": "dict", "required": ["a"], "properties": {
    "a": {"type": "integer", "description": "x"}, "s": {"type": "string", "description": "y"},
    "l": {"type": "array", "items": {"type": "string"}, "description": "z"}}}}
BFCL_CASES = [
    EvalCase("simple_python_x", [], "simple_python",
             {"functions": [FUNCTION], "answers": [{"f": {"a": [1], "s": ["", "hi"], "l": ["", ["x"]]}}],
              "language": "python"}),
    EvalCase("parallel_x", [], "parallel",
             {"functions": [FUNCTION], "answers": [{"f": {"a": [1]}}, {"f": {"a": [2]}}], "language": "python"}),
    EvalCase("simple_java_x", [], "simple_java",
             {"functions": [{**FUNCTION, "parameters": {"type": "dict", "required": [], "properties": {
                 "a": {"type": "long", "description": "x"},
                 "m": {"type": "HashMap", "description": "y"}}}}],
              "answers": [{"f": {"a": [5], "m": ["", {"k": [1]}]}}], "language": "java"}),
    EvalCase("irrelevance_x", [], "irrelevance", {"functions": [FUNCTION], "answers": None, "language": "python"}),
]

PIECES = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<response>", "</response>", "\n", " ", "{", "}",
          '"name"', '"parameters"', ":", ",", "[", "]", '"f"', "null", "1e999", "NaN", "é", "🙂", "\\u0000"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)
call_lines = st.builds(
    lambda name, params, raw: json.dumps(raw if raw is not None else {"name": name, "parameters": params}),
    st.sampled_from(["f", "get_weather", "search_flights", "", "ç"]) | st.text(max_size=6),
    st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    st.none() | json_values)
tag_soup = st.lists(st.sampled_from(PIECES) | call_lines | st.text(max_size=10), max_size=14).map("".join)
structured = st.builds(
    lambda think, lines, resp, tail: f"<think>{think}</think>\n<tool_call>\n" + "\n".join(lines)
    + "\n</tool_call>" + resp + tail,
    st.text(max_size=20), st.lists(call_lines, max_size=3),
    st.sampled_from(["", "\n<response> ok </response>"]), st.sampled_from(["", "\n", "\n\n", " x"]))


@st.composite
def near_miss(draw):
    text = draw(st.sampled_from(EXAMPLES)).meta["ground_truth"]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        if draw(st.booleans()):
            text = text[:i] + text[j:]
        else:
            text = text[:i] + draw(st.sampled_from(PIECES) | st.text(max_size=4)) + text[i:]
    return text


responses = st.one_of(st.text(max_size=200), tag_soup, structured, near_miss())
COUNT = {"responses": 0}


@settings(max_examples=BATCHES, deadline=None, derandomize=True)
@given(batch=st.lists(responses, min_size=BATCH, max_size=BATCH))
def test_ten_thousand_responses_never_raise_and_stay_in_range(batch):
    for i, response in enumerate(batch):
        COUNT["responses"] += 1
        ex = EXAMPLES[(COUNT["responses"] + i) % len(EXAMPLES)]
        fmt, cor = TASK.score(ex, response)
        assert fmt.value in (0.0, 1.0)
        assert not math.isnan(cor.value) and -3.0 <= cor.value <= 3.0
        if not ex.meta["reference_calls"]:
            assert cor.value == 0.0
        for verdict in (fmt, cor):
            assert all(0 <= a <= b <= len(response) for a, b in verdict.spans)
            json.dumps(verdict.to_json(), default=str)
        row = score_case(BFCL_CASES[COUNT["responses"] % len(BFCL_CASES)], response)
        assert isinstance(row["valid"], bool)


def test_fuzz_count_reached():
    """Runs after the fuzz test in file order; prints how many responses were checked."""
    print(f"\ntoolcall fuzz: {COUNT['responses']} responses scored without error")
    assert COUNT["responses"] >= BATCH * BATCHES or COUNT["responses"] == 0
