"""Hypothesis fuzzing: 10,000 arbitrary and near-miss responses never raise and stay in range.

Responses are arbitrary unicode text, tag soups built from RLLA pieces and JSON call lines with
arbitrary values, well-laid-out answers with arbitrary calls, and near misses obtained by editing
reference answers (deleting spans, inserting tags or JSON fragments). Each response is scored
against demo examples of every kind (single, parallel, no-call, ...) and, for the decoder, BFCL
cases of every category shape.

Two runs in the default suite: 10,000 responses whose generation Hypothesis drives through seeds
(a seed per batch of 40, expanded by the fast generators below), and 1,000 responses built by
Hypothesis strategies directly (with shrinking). The ``slow`` run builds all 10,000 with strategies.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.base import EvalCase
from evals.bfcl import score_case
from tasks.data_source import load_examples
from tasks.toolcall.task import ToolCallTask

TASK = ToolCallTask()
DEMO = load_examples(TASK, "train")
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
COUNT = {"seeded": 0, "strategies": 0}


# -- fast generators, driven by a Hypothesis-drawn seed -------------------------------------------------------
_ALPHABET = [chr(c) for c in range(32, 127)] + list("\n\t\r\x00éßçø漢字😀\u200b\ufeff") + ["<", ">", "/"]


def _rand_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(8 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-10**6, 10**6)
    if kind == 3:
        return rng.choice([0.5, -1e300, 1e-9, float("inf"), float("nan"), 3.0])
    if kind in (4, 5):
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(8)))
    if kind == 6:
        return [_rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_rand_value(rng, 3) or "k": _rand_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def _rand_call_line(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return json.dumps(_rand_value(rng))
    name = rng.choice(["f", "get_weather", "search_flights", "", "ç", "create_event"])
    params = {rng.choice(["city", "a", "units", "days", ""]): _rand_value(rng) for _ in range(rng.randrange(4))}
    line = json.dumps({"name": name, "parameters": params})
    if rng.random() < 0.1:
        cut = rng.randrange(len(line) + 1)
        line = line[:cut]
    return line


def _rand_response(rng: random.Random) -> str:
    mode = rng.randrange(4)
    if mode == 0:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(200)))
    if mode == 1:
        return "".join(rng.choice(PIECES) if rng.random() < 0.7 else _rand_call_line(rng)
                       for _ in range(rng.randrange(14)))
    if mode == 2:
        lines = [_rand_call_line(rng) for _ in range(rng.randrange(4))]
        return (f"<think>{_rand_value(rng, 3) or ''}</think>\n<tool_call>\n" + "\n".join(lines) + "\n</tool_call>"
                + rng.choice(["", "\n<response> ok </response>"]) + rng.choice(["", "\n", "\n\n", " x"]))
    text = rng.choice(EXAMPLES).meta["ground_truth"]
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.randrange(13))
        insert = rng.choice(PIECES) if rng.random() < 0.7 else "".join(rng.choice(_ALPHABET) for _ in range(4))
        text = text[:i] + text[j:] if rng.random() < 0.5 else text[:i] + insert + text[i:]
    return text


def _check(response: str, n: int) -> None:
    ex = EXAMPLES[n % len(EXAMPLES)]
    fmt, cor = TASK.score(ex, response)
    assert fmt.value in (0.0, 1.0)
    assert not math.isnan(cor.value) and -3.0 <= cor.value <= 3.0
    if not ex.meta["reference_calls"]:
        assert cor.value == 0.0
    for verdict in (fmt, cor):
        assert all(0 <= a <= b <= len(response) for a, b in verdict.spans)
        json.dumps(verdict.to_json(), default=str)
    row = score_case(BFCL_CASES[n % len(BFCL_CASES)], response)
    assert isinstance(row["valid"], bool)


@settings(max_examples=BATCHES, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**63))
def test_ten_thousand_seeded_responses_never_raise_and_stay_in_range(seed):
    rng = random.Random(seed)
    for _ in range(BATCH):
        COUNT["seeded"] += 1
        _check(_rand_response(rng), COUNT["seeded"])


@settings(max_examples=100, deadline=None, derandomize=True)
@given(batch=st.lists(responses, min_size=10, max_size=10))
def test_strategy_built_responses_never_raise_and_stay_in_range(batch):
    for response in batch:
        COUNT["strategies"] += 1
        _check(response, COUNT["strategies"])


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, derandomize=True)
@given(batch=st.lists(responses, min_size=10, max_size=10))
def test_ten_thousand_strategy_built_responses_slow(batch):
    for response in batch:
        COUNT["responses"] = COUNT.get("responses", 0) + 1
        _check(response, COUNT["responses"])


def test_fuzz_count_reached():
    """Runs after the fuzz tests in file order; prints how many responses were checked."""
    print(f"\ntoolcall fuzz: {COUNT['seeded']} seeded + {COUNT['strategies']} strategy-built responses "
          f"(+ {COUNT.get('responses', 0)} in the slow run) scored without error")
    assert COUNT["seeded"] in (0, BATCH * BATCHES)
