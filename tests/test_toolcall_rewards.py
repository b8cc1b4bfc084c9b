"""Format and correctness rewards of the tool-calling task: hand-computed tables.

Correctness (ToolRL): R = 6 * score / local_max - 3, score = IoU(names) + per matched reference
call [IoU(param names) + #equal values], local_max = 1 + sum(1 + #params). Each expected value
below is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import json

import pytest

from tasks.toolcall.prompts import answer_text, history_message, system_message
from tasks.toolcall.task import ToolCallTask

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)

TASK = ToolCallTask()
TOOLS = [
    ("get_weather", "Weather now.", {"city": {"type": "str"}, "units": {"type": "str, optional"}}),
    ("get_forecast", "Forecast.", {"city": {"type": "str"}, "days": {"type": "int"}}),
    ("f", "F.", {"a": {"type": "int"}}),
    ("g", "G.", {"b": {"type": "int"}}),
    ("get_page", "Paged news.", {"page": {"type": "int"}, "flag": {"type": "bool, optional"},
                                 "ratio": {"type": "float"}, "name": {"type": "string"}}),
    ("ping", "No arguments.", {}),
]


def example(truth: str, ident: str = "t"):
    row = {"id": ident, "prompt": [system_message(TOOLS), history_message([("user", "please help")])],
           "reward_model": {"ground_truth": truth}}
    return TASK.example_from_row(row)


def call(tool: str, **params) -> str:
    return json.dumps({"name": tool, "parameters": params}, ensure_ascii=False)


def resp(*lines: str, think: str = "ok", tail: str = "") -> str:
    return f"<think> {think} </think>\n<tool_call>\n" + "\n".join(lines) + "\n</tool_call>" + tail


WEATHER = example(resp(call("get_weather", city="Paris", units="metric")), "weather")
TWO = example(resp(call("f", a=1), call("g", b=2)), "two")
ONE_F = example(resp(call("f", a=1)), "one_f")

CORRECTNESS_TABLE = [
    # (example, response, expected correctness)
    (WEATHER, resp(call("get_weather", city="Paris", units="metric")), 3.0),  # exact
    (WEATHER, "", -3.0),  # empty response: no block
    (WEATHER, "<think> ok </think>\n<tool_call>\n" + call("get_weather", city="Paris", units="metric"), -3.0),
    # wrong value: 1 (names) + 1 (param IoU) + 1 (city equal) = 3 of local_max 1 + 3 = 4 -> 6*3/4-3
    (WEATHER, resp(call("get_weather", city="Paris", units="imperial")), 1.5),
    # wrong value type (int for str): same arithmetic as a wrong value
    (WEATHER, resp(call("get_weather", city=75, units="metric")), 1.5),
    # case change is a different value (Python equality)
    (WEATHER, resp(call("get_weather", city="paris", units="metric")), 1.5),
    # extra parameter: 1 + IoU 2/3 + 2 equal = 11/3 -> 6*(11/3)/4-3 = 2.5
    (WEATHER, resp(call("get_weather", city="Paris", units="metric", extra=1)), 2.5),
    # missing parameter: 1 + IoU 1/2 + 1 equal = 2.5 -> 6*2.5/4-3 = 0.75
    (WEATHER, resp(call("get_weather", city="Paris")), 0.75),
    # wrong function: name IoU 0, no match -> -3
    (WEATHER, resp(call("get_forecast", city="Paris", units="metric")), -3.0),
    # partial name overlap: names IoU 1/2 + f matched (1 + 1) = 2.5 of 1 + 2 + 2 = 5 -> 0
    (TWO, resp(call("f", a=1)), 0.0),
    # duplicated call: names IoU 1/(1+2-1) = 0.5, + 2 -> 2.5 of 3 -> 2.0
    (ONE_F, resp(call("f", a=1), call("f", a=1)), 2.0),
    # order swap: not the same list, but full partial credit 1 + 2 + 2 = 5 of 5 -> 3
    (TWO, resp(call("g", b=2), call("f", a=1)), 3.0),
    # 1.0 == 1 in Python: exact
    (ONE_F, resp(call("f", a=1.0)), 3.0),
    # "1" != 1: 1 + 1 + 0 = 2 of 3 -> 1
    (ONE_F, resp(call("f", a="1")), 1.0),
    # only parameter missing: the call matches with score 0, so it is unmatched: 1 of 3 -> -1
    (ONE_F, resp(call("f")), -1.0),
    # unparsable block
    (ONE_F, resp("{not json}"), -3.0),
    (ONE_F, resp('{"name": "f"}'), -3.0),  # no "parameters"
    (ONE_F, resp("[1, 2]"), -3.0),  # not an object
    # empty block: no predicted call, names IoU 0 -> -3
    (ONE_F, resp(), -3.0),
    # text outside the tags does not matter to correctness
    (ONE_F, "Sure! " + resp(call("f", a=1)) + " bye", 3.0),
    # a think that mentions the tags: the block after </think> is read
    (ONE_F, resp(call("f", a=1), think="I will write <tool_call> then </tool_call>"), 3.0),
    # unicode values
    (example(resp(call("get_weather", city="São Paulo"))), resp(call("get_weather", city="São Paulo")), 3.0),
    (example(resp(call("get_weather", city="São Paulo"))),
     resp(json.dumps({"name": "get_weather", "parameters": {"city": "São Paulo"}})), 3.0),  # \\u escapes
    (example(resp(call("ping"))), resp(call("ping")), 3.0),
    (example(resp(call("ping"))), resp(call("pong")), -3.0),
    # Appendix B: the reference "1" for an int parameter becomes 1
    (example(resp(call("get_page", page="1"))), resp(call("get_page", page=1)), 3.0),
    (example(resp(call("get_page", page="1"))), resp(call("get_page", page="1")), 1.0),
    (example(resp(call("get_page", flag="true", ratio="0.5"))), resp(call("get_page", flag=True, ratio=0.5)), 3.0),
    (example(resp(call("get_page", name="12"))), resp(call("get_page", name="12")), 3.0),  # a string stays
    (example(resp(call("get_page", page="one"))), resp(call("get_page", page="one")), 3.0),  # not numeric
]


@pytest.mark.parametrize("ex,response,expected", CORRECTNESS_TABLE)
def test_correctness_table(ex, response, expected):
    verdicts = TASK.score(ex, response)
    assert [v.reward for v in verdicts] == ["format", "correctness"]
    assert verdicts[1].value == pytest.approx(expected), verdicts[1].reason


NO_CALL = example("<think> chat </think>\n<response> Hello! </response>", "nocall")
BOTH = example(resp(call("f", a=1)) + "\n<response> done </response>", "both")
THINK = example("<think> only thinking </think>", "think")

FORMAT_TABLE = [
    (ONE_F, resp(call("f", a=1)), 1.0),
    (ONE_F, resp(call("f", a=1)) + "\n", 1.0),  # one final newline is allowed (Python's $)
    (ONE_F, resp(call("f", a=1)) + "\n\n", 0.0),
    (ONE_F, "Sure! " + resp(call("f", a=1)), 0.0),  # text before <think>
    (ONE_F, resp(call("f", a=1)) + " bye", 0.0),  # text after </tool_call>
    (ONE_F, "<think> ok </think>\n<tool_call>\n" + call("f", a=1), 0.0),  # missing </tool_call>
    (ONE_F, resp(call("f", a=1)).replace("<think>", ""), 0.0),
    (ONE_F, resp(call("f", a=1), think="see <tool_call>"), 0.0),  # a tag twice
    (ONE_F, resp("{not json}"), 1.0),  # the format pattern does not parse JSON
    (ONE_F, "<think> ok </think><tool_call>\n" + call("f", a=1) + "\n</tool_call>", 0.0),  # no newline
    (ONE_F, "", 0.0),
    (ONE_F, "<think> ok </think>\n<response> hi </response>", 0.0),  # wrong kind
    (NO_CALL, "<think> ok </think>\n<response> hi </response>", 1.0),
    (NO_CALL, "<think> ok </think>\n<response> hi </response>\n", 1.0),
    (NO_CALL, resp(call("f", a=1)), 0.0),
    (NO_CALL, "<think> ok </think>\n<response> hi", 0.0),
    (NO_CALL, "<think> 思考 </think>\n<response> こんにちは 👋 </response>", 1.0),
    (BOTH, resp(call("f", a=1)) + "\n<response> done </response>", 1.0),
    (BOTH, resp(call("f", a=1)), 0.0),
    (THINK, "<think> only </think>", 1.0),
    (THINK, "<think> only </think>\n<response> x </response>", 0.0),
]


@pytest.mark.parametrize("ex,response,expected", FORMAT_TABLE)
def test_format_table(ex, response, expected):
    assert TASK.score(ex, response)[0].value == expected


def test_correctness_is_zero_whenever_the_reference_makes_no_call():
    for response in ["", "<think> ok </think>\n<response> hi </response>", resp(call("f", a=1)), "garbage"]:
        verdict = TASK.score(NO_CALL, response)[1]
        assert verdict.value == 0.0
        assert verdict.spans == []
        assert verdict.block is None


def test_missing_closing_tag_decision_scores_minus_three_and_format_zero():
    """Decision: a correct call without </tool_call> has no call block -> correctness -3, format 0."""
    response = "<think> ok </think>\n<tool_call>\n" + call("f", a=1) + "\n"
    fmt, cor = TASK.score(ONE_F, response)
    assert (fmt.value, cor.value) == (0.0, -3.0)
    assert "never closed" in cor.reason


def test_spans_point_at_the_tags_and_the_call_block():
    response = "<think> ok </think>\n<tool_call>\n" + call("f", a=1) + "\n</tool_call>"
    fmt, cor = TASK.score(ONE_F, response)
    assert [response[a:b] for a, b in fmt.spans] == ["<think>", "</think>", "<tool_call>", "</tool_call>"]
    (a, b), = cor.spans
    assert response[a:b].startswith("<tool_call>") and response[a:b].endswith("</tool_call>")
    assert cor.detail["predicted_calls"] == [{"name": "f", "parameters": {"a": 1}}]


def test_verdict_details_carry_the_reference_and_the_arithmetic():
    cor = TASK.score(WEATHER, resp(call("get_weather", city="Paris")))[1]
    assert cor.detail["reference_calls"] == [{"name": "get_weather", "parameters": {"city": "Paris", "units": "metric"}}]
    assert cor.detail["score"] == pytest.approx(2.5) and cor.detail["local_max"] == 4.0
    fmt = TASK.score(WEATHER, "x")[0]
    assert fmt.detail["kind"] == "tool_call" and fmt.detail["tag_counts"]["<think>"] == 0


def test_reference_answer_scores_full_marks_on_its_own_example():
    for ex in (WEATHER, TWO, ONE_F, NO_CALL, BOTH, THINK):
        fmt, cor = TASK.score(ex, ex.meta["ground_truth"])
        assert fmt.value == 1.0
        assert cor.value == (0.0 if ex is NO_CALL or ex is THINK else 3.0)


def test_answer_text_round_trips():
    text = answer_text("t", None, "r")
    assert TASK.score(NO_CALL, text)[0].value == 1.0
