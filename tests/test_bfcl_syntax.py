"""BFCL result decoding (text in Python / Java / JavaScript syntax, and the list forms) and writing."""

from __future__ import annotations

import pytest

from evals.base import EvalCase
from evals.bfcl import score_case, summarize
from tasks.toolcall.bfcl_syntax import decode_result, split_top_level, write_calls


@pytest.mark.parametrize("result,expected", [
    ("[f(a=1, b='x')]", [{"f": {"a": 1, "b": "x"}}]),
    ("f(a=1)", [{"f": {"a": 1}}]),  # brackets optional
    ("```\n[f(a=1)]\n```", [{"f": {"a": 1}}]),  # backticks and newlines around it
    ("'[f(a=1)]'", [{"f": {"a": 1}}]),  # quotes wrapping the whole text
    ("[math.factorial(n=5), g()]", [{"math.factorial": {"n": 5}}, {"g": {}}]),
    ("[f(x=-3, y=+2.5, z=2*3, s='a' + 'b', big=10**100)]",
     [{"f": {"x": -3, "y": 2.5, "z": 6, "s": "ab", "big": "10 ** 100"}}]),  # huge powers stay text
    ("[f(v=some_variable, t=(1, 2), d={'k': [1, None]}, flag=True)]",
     [{"f": {"v": "some_variable", "t": (1, 2), "d": {"k": [1, None]}, "flag": True}}]),
    ("[f(inner=g(a=1), raw=h(2), expr=x[0], e=...)]",
     [{"f": {"inner": {"g": {"a": 1}}, "raw": "h(2)", "expr": "x[0]", "e": "..."}}]),
    ("[f(1, 2, a=3)]", [{"f": {"a": 3}}]),  # positional arguments are not read
    ("[]", []),
    ("[f(a=1)", [{"f": {"a": 1}}]),  # a missing closing bracket is added, as BFCL does
    ('[{"f": {"a": 1}}]', [{"f": {"a": 1}}]),  # the list form as JSON text
])
def test_python_text(result, expected):
    assert decode_result(result, "python") == (expected, "")


@pytest.mark.parametrize("result", [
    "I cannot help with that.", "[f(a=1), 'text']", "", "[(lambda: 1)()]", "[f(a=1/0)]x(",
    "[" * 200 + "]" * 200,
])
def test_python_text_that_is_not_calls_is_a_decoding_failure(result):
    calls, why = decode_result(result, "python")
    assert calls is None and why


@pytest.mark.parametrize("result,expected", [
    ('[Cls.run(n=5L, s="hello, world", xs=new ArrayList<>(Arrays.asList("a", "b")))]',
     [{"Cls.run": {"n": "5L", "s": "hello, world", "xs": 'new ArrayList<>(Arrays.asList("a", "b"))'}}]),
    ('[put(m=new HashMap<String, Object>() {{ put("k", 1); }}, c=\'x\', arr=new int[]{1, 2})]',
     [{"put": {"m": 'new HashMap<String, Object>() {{ put("k", 1); }}', "c": "x", "arr": "new int[]{1, 2}"}}]),
    ('[f(n="5L")]', [{"f": {"n": "5L"}}]),  # a quoted value loses its quotes
    ('[f(a="x" + "y")]', [{"f": {"a": '"x" + "y"'}}]),  # not one literal: kept as written
    ("[f()]", [{"f": {}}]),
])
def test_java_text(result, expected):
    assert decode_result(result, "java") == (expected, "")


@pytest.mark.parametrize("result,expected", [
    ('[calc(xs=[1, 2], opts={k: "v", n: 2}, name="Ann", big=10n, cb=(a) => a + 1)]',
     [{"calc": {"xs": "[1, 2]", "opts": '{k: "v", n: 2}', "name": "Ann", "big": "10n", "cb": "(a) => a + 1"}}]),
    ("f(s='it''s')", [{"f": {"s": "'it''s'"}}]),  # two literals side by side: kept as written
])
def test_javascript_text(result, expected):
    assert decode_result(result, "javascript") == (expected, "")


@pytest.mark.parametrize("result", [
    "[f(a=1, a=2)]", "[f(1)]", "[f(a=)]", '[f(a="open)]', "[f(a=(1]]", "[not a call]", "[f(a == 1)]",
])
def test_java_and_javascript_failures(result):
    for language in ("java", "javascript"):
        calls, why = decode_result(result, language)
        assert calls is None and why, (language, result)


@pytest.mark.parametrize("result,expected,ok", [
    ([{"f": {"a": 1}}], [{"f": {"a": 1}}], True),
    ([{"f": '{"a": 1}'}, {"g": "{}"}], [{"f": {"a": 1}}, {"g": {}}], True),  # arguments as JSON text
    ([], [], True),
    ([{"f": "not json"}], None, False),
    ([{"f": {}, "g": {}}], None, False),
    (["f(a=1)"], None, False),
    ({"f": {}}, None, False),
    (None, None, False),
])
def test_list_forms(result, expected, ok):
    calls, why = decode_result(result, "python")
    assert calls == expected and (why == "") is ok


def test_split_top_level():
    assert split_top_level('a=1, b=f(2, 3), c="x,y", d=Map<K, V>') == ["a=1", " b=f(2, 3)", ' c="x,y"', " d=Map<K, V>"]
    assert split_top_level("a < b, c") == ["a < b", " c"]
    assert split_top_level("  ") == []
    assert split_top_level("f(a") is None and split_top_level("a)") is None


@pytest.mark.parametrize("calls,language", [
    ([{"f": {"a": 1, "s": "it's", "xs": [1.5, None], "d": {"k": True}}}, {"g": {}}], "python"),
    ([{"Cls.run": {"n": "5L", "xs": 'new ArrayList<>(Arrays.asList("a"))', "s": "a b"}}], "java"),
    ([{"f": {"o": '{k: "v"}', "xs": "[1, 2]", "name": "Ann"}}], "javascript"),
])
def test_written_calls_decode_to_themselves(calls, language):
    assert decode_result(write_calls(calls, language), language) == (calls, "")


FN = {"name": "f", "description": "d", "parameters": {"type": "dict", "required": ["a"], "properties": {
    "a": {"type": "integer", "description": "x"}}}}
SIMPLE = EvalCase("simple_python_1", [], "simple_python",
                  {"functions": [FN], "answers": [{"f": {"a": [3]}}], "language": "python"})
IRREL = EvalCase("irrelevance_1", [], "irrelevance", {"functions": [FN], "answers": None, "language": "python"})


@pytest.mark.parametrize("case,response,valid,error_type", [
    (SIMPLE, "[f(a=3)]", True, ""),
    (SIMPLE, '[{"f": {"a": 3}}]', True, ""),
    (SIMPLE, "[f(a=4)]", False, "value_error:others"),
    (SIMPLE, "[f(a=3), f(a=3)]", False, "simple_function_checker:wrong_count"),
    (SIMPLE, "I would call f.", False, "ast_decoder:decoder_failed"),
    (SIMPLE, None, False, "missing_response"),
    (IRREL, "There is no suitable function.", True, ""),
    (IRREL, "[]", True, ""),
    (IRREL, "[f(a=1)]", False, "irrelevance_error:decoder_success"),
])
def test_scoring_bfcl_results(case, response, valid, error_type):
    row = score_case(case, response, syntax="bfcl")
    assert (row["valid"], row["error_type"], row["format_ok"]) == (valid, error_type, None)


def test_format_rate_is_not_applicable_to_bfcl_results():
    rows = [score_case(SIMPLE, "[f(a=3)]", syntax="bfcl"), score_case(IRREL, "no", syntax="bfcl")]
    s = summarize(rows)
    assert s["format_rate"] is None and s["categories"]["simple_python"]["format_rate"] is None
    assert s["categories"]["simple_python"]["accuracy"] == 1.0
