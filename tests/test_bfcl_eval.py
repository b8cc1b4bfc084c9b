"""BFCLv4Evaluator: loading, prompts, decoding rules, aggregates (hand-computed) and the oracle run."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from evals.base import EvalCase, Evaluator
from evals.bfcl import (
    CATEGORIES,
    BFCLv4Evaluator,
    expand_categories,
    markdown_table,
    package_data_dir,
    score_case,
    summarize,
)
from evals.registry import EVALUATORS
from tasks.base import DataError
from tasks.toolcall.bfcl_gold import gold_response
from tasks.toolcall.bfcl_prompts import case_messages, decode_calls
from tasks.toolcall.data import read_rows
from tasks.toolcall.parsing import parse_tool_list

DATA = os.environ.get("MRBENCH_DATA_DIR")
needs_data = pytest.mark.skipif(not DATA, reason="MRBENCH_DATA_DIR is not set: the BFCL files are needed")
EVAL = BFCLv4Evaluator()


def test_registered_and_zero_arg_constructible():
    ev = EVALUATORS.get("bfcl-v4")()
    assert isinstance(ev, Evaluator) and ev.name == "bfcl-v4" and ev.task == "toolcall"


@pytest.mark.parametrize("given,expected", [
    (None, CATEGORIES),
    (["simple"], ["simple_python", "simple_java", "simple_javascript"]),
    (["live_parallel", "multiple"], ["multiple", "live_parallel"]),
    (["irrelevance,live_irrelevance"], ["irrelevance", "live_irrelevance"]),
    (["non_live"], ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel",
                    "parallel_multiple", "irrelevance"]),
])
def test_category_selection(given, expected):
    assert expand_categories(given) == expected


def test_unknown_category_lists_the_known_ones():
    with pytest.raises(ValueError, match="known categories: simple_python"):
        expand_categories(["simple_rust"])


# -- prompts and decoding -------------------------------------------------------------------------------------
JAVA_FN = {"name": "Cls.run", "description": "Runs.", "parameters": {"type": "dict", "required": ["n"], "properties": {
    "n": {"type": "long", "description": "count"},
    "xs": {"type": "ArrayList", "items": {"type": "String"}, "description": "names"}}}}


def test_prompt_lists_tools_in_rlla_form_with_language_hints():
    question = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Run it 5 times"}]]
    system, user = case_messages(question, [JAVA_FN], "java")
    tools = parse_tool_list(system["content"])
    assert tools["Cls.run"]["n"]["type"] == "string"
    assert tools["Cls.run"]["xs"]["type"] == "string, optional"
    assert "long" in tools["Cls.run"]["n"]["description"] and "items" not in tools["Cls.run"]["xs"]
    assert "Java" in system["content"]
    assert user["content"].endswith("<system> Be brief. </system>\n\n<user> Run it 5 times </user>")


@pytest.mark.parametrize("response,decoded", [
    ('<think>a</think>\n<tool_call>\n{"name": "f", "parameters": {"x": 1}}\n</tool_call>', [{"f": {"x": 1}}]),
    ('<tool_call>\n{"name": "f", "parameters": {}}\n{"name": "g", "parameters": {"y": [1]}}\n</tool_call>',
     [{"f": {}}, {"g": {"y": [1]}}]),
    ("<think>a</think>\n<tool_call>\n</tool_call>", []),
    ('<tool_call>\n{"name": "f", "parameters": {}}', None),  # no closing tag
    ("<tool_call>\nf(x=1)\n</tool_call>", None),  # not our format
    ("<response> hi </response>", None),
])
def test_decoding(response, decoded):
    assert decode_calls(response)[0] == decoded


FN = {"name": "f", "description": "d", "parameters": {"type": "dict", "required": ["a"], "properties": {
    "a": {"type": "integer", "description": "x"}, "unit": {"type": "string", "description": "u"}}}}
SIMPLE = EvalCase("simple_python_1", [], "simple_python",
                  {"functions": [FN], "answers": [{"f": {"a": [3], "unit": ["", "km"]}}], "language": "python"})
IRREL = EvalCase("irrelevance_1", [], "irrelevance", {"functions": [FN], "answers": None, "language": "python"})


def _resp(*calls):
    return "<think> t </think>\n<tool_call>\n" + "\n".join(json.dumps(c) for c in calls) + "\n</tool_call>"


def test_format_ok_follows_the_training_format_reward():
    good = "<think> t </think>\n<tool_call>\n" + json.dumps({"name": "f", "parameters": {"a": 3}}) + "\n</tool_call>"
    assert score_case(SIMPLE, good)["format_ok"] and not score_case(SIMPLE, "x " + good)["format_ok"]
    assert score_case(IRREL, "<think> t </think>\n<response> no </response>")["format_ok"]
    assert not score_case(IRREL, good)["format_ok"] and not score_case(SIMPLE, None)["format_ok"]


@pytest.mark.parametrize("case,response,valid,error_type", [
    (SIMPLE, _resp({"name": "f", "parameters": {"a": 3}}), True, ""),
    (SIMPLE, _resp({"name": "f", "parameters": {"a": 3, "unit": " K.M "}}), True, ""),  # normalised string
    (SIMPLE, _resp({"name": "f", "parameters": {"a": 3.0}}), False, "type_error:simple"),  # float for integer
    (SIMPLE, _resp({"name": "f", "parameters": {"a": "3"}}), False, "type_error:simple"),  # numeric string
    (SIMPLE, _resp({"name": "f", "parameters": {"unit": "km"}}), False, "simple_function_checker:missing_required"),
    (SIMPLE, _resp({"name": "f", "parameters": {"a": 3, "z": 1}}), False, "simple_function_checker:unexpected_param"),
    (SIMPLE, _resp({"name": "g", "parameters": {"a": 3}}), False, "simple_function_checker:wrong_func_name"),
    (SIMPLE, _resp({"name": "f", "parameters": {"a": 3}}, {"name": "f", "parameters": {"a": 3}}), False,
     "simple_function_checker:wrong_count"),
    (SIMPLE, '<think> t </think>\n<tool_call>\n{"name": "f", "parameters": {"a": 3}}', False,
     "ast_decoder:decoder_failed"),
    (SIMPLE, None, False, "missing_response"),
    (IRREL, "<think> t </think>\n<response> cannot help </response>", True, ""),
    (IRREL, "<think> t </think>\n<tool_call>\n</tool_call>", True, ""),
    (IRREL, _resp({"name": "f", "parameters": {"a": 1}}), False, "irrelevance_error:decoder_success"),
])
def test_score_case_table(case, response, valid, error_type):
    row = score_case(case, response)
    assert (row["valid"], row["error_type"]) == (valid, error_type)
    assert set(row) == {"id", "category", "valid", "error_type", "error", "format_ok"}


def test_aggregates_by_hand():
    """simple: python 1/2, java 1/1, js 0/1 -> simple macro (0.5 + 1 + 0) / 3 = 0.5;
    multiple 1/1, parallel 0/2, parallel_multiple 1/2 -> non-live macro (0.5 + 1 + 0 + 0.5) / 4 = 0.5,
    non-live micro 4/9; live_simple 1/3, live_multiple 2/2 -> live micro 3/5, live macro (1/3 + 1) / 2."""
    spec = {"simple_python": [1, 0], "simple_java": [1], "simple_javascript": [0], "multiple": [1],
            "parallel": [0, 0], "parallel_multiple": [1, 0], "live_simple": [1, 0, 0], "live_multiple": [1, 1],
            "irrelevance": [1, 1, 0, 1]}
    rows = [{"id": f"{c}_{i}", "category": c, "valid": bool(v), "error_type": "", "error": "", "format_ok": i == 0}
            for c, vs in spec.items() for i, v in enumerate(vs)]
    s = summarize(rows)
    assert s["simple_macro"] == pytest.approx(0.5)
    assert s["non_live_macro"] == pytest.approx(0.5)
    assert s["non_live_micro"] == pytest.approx(4 / 9)
    assert s["live_micro"] == pytest.approx(3 / 5)
    assert s["live_macro"] == pytest.approx((1 / 3 + 1) / 2)
    assert s["irrelevance"] == pytest.approx(0.75) and s["live_irrelevance"] is None
    assert s["non_live_complete"] and not s["live_complete"]
    assert s["categories"]["parallel"] == {"correct": 0, "total": 2, "accuracy": 0.0, "format_ok": 1,
                                           "format_rate": 0.5}
    assert s["format_rate"] == pytest.approx(9 / 18)  # the first row of each of the 9 categories
    table = markdown_table(s)
    assert "| non_live_macro | 50.00 |" in table and "| live_irrelevance | n/a |" in table
    assert "| parallel | 0 | 2 | 0.00 | 50.00 |" in table


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="BFCL_v4_simple_python.json"):
        EVAL.cases(data_dir=str(tmp_path), categories=["simple_python"])


def test_bad_json_line_names_the_file_and_row(tmp_path):
    (tmp_path / "possible_answer").mkdir()
    good = {"id": "simple_python_0", "question": [[{"role": "user", "content": "hi"}]], "function": []}
    (tmp_path / "BFCL_v4_simple_python.json").write_text(json.dumps(good) + "\n\n{not json\n")
    with pytest.raises(DataError, match=r"BFCL_v4_simple_python\.json, row 3: not valid JSON"):  # line 3
        EVAL.cases(data_dir=str(tmp_path), categories=["simple_python"])
    # the ToolRL reader shares the JSON-lines rule
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"id": 1}\n[oops\n')
    with pytest.raises(DataError, match=r"rows\.jsonl, row 2: not valid JSON"):
        read_rows(str(bad))


def test_package_data_is_the_default_when_installed():
    if package_data_dir() is None:
        with pytest.raises(DataError, match="bfcl-eval"):
            EVAL.cases(categories=["simple_javascript"])
    else:
        assert len(EVAL.cases(categories=["simple_javascript"])) == 50


@needs_data
def test_oracle_responses_score_nearly_everything_on_the_real_files(tmp_path):
    root = os.path.join(DATA, "bfcl")
    cases = EVAL.cases(data_dir=DATA)  # the data root works too (bfcl/ subfolder)
    assert len(cases) == len(EVAL.cases(data_dir=root))
    assert {c.category for c in cases} == set(CATEGORIES)
    responses = {c.id: gold_response(c.meta["functions"], c.meta["answers"], c.meta["language"])
                 if c.meta["answers"] else "<think> none </think>\n<response> no tool fits </response>"
                 for c in cases}
    report = EVAL.score(cases, responses)
    s = report.summary
    print(f"\nBFCL oracle: {len(cases)} cases; non_live_macro {s['non_live_macro']:.4f}, "
          f"live_micro {s['live_micro']:.4f}, irrelevance {s['irrelevance']:.4f}, "
          f"live_irrelevance {s['live_irrelevance']:.4f}")
    assert s["non_live_macro"] > 0.99 and s["live_micro"] > 0.99
    assert s["irrelevance"] == 1.0 and s["live_irrelevance"] == 1.0
    assert s["format_rate"] == 1.0
    assert report.rows[0].keys() >= {"id", "category", "valid", "error_type"}
    # a copy of one category in another directory loads the same
    os.makedirs(tmp_path / "possible_answer")
    shutil.copy(os.path.join(root, "BFCL_v4_multiple.json"), tmp_path)
    shutil.copy(os.path.join(root, "possible_answer", "BFCL_v4_multiple.json"), tmp_path / "possible_answer")
    assert len(EVAL.cases(data_dir=str(tmp_path), categories=["multiple"])) == 200
