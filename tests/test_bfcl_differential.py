"""Differential test: this project's BFCL checker against the official one from ``bfcl-eval``.

Over every single-turn case in ``$MRBENCH_DATA_DIR/bfcl``: the gold answer (first acceptable
values, :mod:`tasks.toolcall.bfcl_gold`) and systematic perturbations of it (wrong value, wrong
type, missing required parameter, extra unknown parameter, wrong or renamed function, no call,
dropped / duplicated / reordered call, alternative acceptable value, int for a whole float). Each variant is rendered as a
response in this project's format, decoded by our decoder, and the decoded calls go to both
checkers; the valid/invalid verdicts must agree on 100% of them. Irrelevance cases compare our
verdict with the official "no call decoded" rule (``bfcl_eval.utils.is_empty_output``).

Only what the official checker imports for API models (``bfcl_eval.constants.model_config``,
which imports every provider SDK) is stubbed, inside this test.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import os
import sys
import time
import types
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evals.bfcl import IRRELEVANCE, BFCLv4Evaluator, score_case
from tasks.toolcall.bfcl_checker import check
from tasks.toolcall.bfcl_gold import gold_calls
from tasks.toolcall.bfcl_prompts import decode_calls
from tasks.toolcall.parsing import ToolCall
from tasks.toolcall.prompts import answer_text

DATA = os.environ.get("MRBENCH_DATA_DIR")
pytestmark = [
    pytest.mark.skipif(not DATA, reason="MRBENCH_DATA_DIR is not set: the BFCL files are needed"),
    pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                       reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval)"),
]


class _AnyModel(dict):
    """MODEL_CONFIG_MAPPING stand-in: every model keeps dots in function names."""

    def __missing__(self, key: str) -> Any:
        return types.SimpleNamespace(underscore_to_dot=False)


@pytest.fixture(scope="module")
def official():
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = _AnyModel()
    saved = sys.modules.get("bfcl_eval.constants.model_config")
    sys.modules["bfcl_eval.constants.model_config"] = stub
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.utils import is_empty_output
    finally:
        if saved is None:
            sys.modules.pop("bfcl_eval.constants.model_config", None)
        else:
            sys.modules["bfcl_eval.constants.model_config"] = saved
    langs = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}
    return ast_checker, is_empty_output, langs


@pytest.fixture(scope="module")
def cases():
    return BFCLv4Evaluator().cases(data_dir=os.path.join(DATA, "bfcl") if DATA else None)


# -- perturbations -----------------------------------------------------------------------------------------
def _wrong_value(v: Any) -> Any:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return v + 7
    if isinstance(v, float):
        return v + 1.5
    if isinstance(v, str):
        return v + "zq9"
    if isinstance(v, list):
        return [*v, v[0]] if v else ["zq9"]
    if isinstance(v, dict):
        return {**v, "zq9": "zq9"}
    return "zq9"


def _wrong_type(v: Any, language: str) -> Any:
    if language != "python":
        return 12345 if isinstance(v, str) else str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return 12345
    return "zq9"


_SKIP = object()  # a variant function's "not applicable here"


def _first_param(calls: list[ToolCall]) -> str | None:
    return next(iter(calls[0].parameters), None) if calls else None


def perturbations(case, calls: list[ToolCall]) -> dict[str, list[ToolCall]]:
    """Named variants of the gold call list (each a fresh copy)."""
    lang = case.meta["language"]
    out: dict[str, list[ToolCall]] = {}

    def variant(name: str, fn) -> None:
        new = [ToolCall(c.name, copy.deepcopy(c.parameters)) for c in calls]
        if new and fn(new) is not False:
            out[name] = new

    p = _first_param(calls)

    def set_first(new, f):
        if p is None:
            return False
        new[0].parameters[p] = f(new[0].parameters[p])

    variant("wrong_value", lambda new: set_first(new, _wrong_value))
    variant("wrong_type", lambda new: set_first(new, lambda v: _wrong_type(v, lang)))

    def drop_required(new):
        doc = next((f for f in case.meta["functions"] if f["name"] == new[0].name), None)
        required = [r for r in (doc or {}).get("parameters", {}).get("required", []) if r in new[0].parameters]
        key = required[0] if required else _first_param(new)
        if key is None:
            return False
        del new[0].parameters[key]

    variant("missing_required", drop_required)
    variant("extra_param", lambda new: new[0].parameters.__setitem__("zz_unknown_param", 1))

    def wrong_function(new):
        others = [f["name"] for f in case.meta["functions"] if f["name"] != new[0].name]
        new[0].name = others[0] if others else new[0].name + "_other"

    variant("wrong_function", wrong_function)
    variant("renamed_function", lambda new: setattr(new[0], "name", new[0].name + "_v2"))
    variant("no_calls", lambda new: new.clear())
    variant("duplicated_call", lambda new: new.append(ToolCall(new[0].name, copy.deepcopy(new[0].parameters))))
    if len(calls) > 1:
        variant("dropped_call", lambda new: new.pop())
        variant("reordered_calls", lambda new: new.reverse())

    def alternative(new):
        for c, answer in zip(new, case.meta["answers"]):
            for param, acceptable in next(iter(answer.values())).items():
                if lang == "python" and param in c.parameters and len(acceptable) > 1 and acceptable[1] != "":
                    c.parameters[param] = acceptable[1]
                    return None
        return False

    variant("alternative_value", alternative)

    def int_for_float(new):
        for c in new:
            for k, v in c.parameters.items():
                if lang == "python" and type(v) is float and v.is_integer():
                    c.parameters[k] = int(v)
                    return None
        return False

    variant("int_for_float", int_for_float)

    def first_of(new, kinds, fn):
        for c in new:
            for k, v in c.parameters.items():
                if type(v) in kinds:
                    new_v = fn(v)
                    if new_v is not _SKIP:
                        c.parameters[k] = new_v
                        return None
        return False

    # value-level variants that exercise normalisation and the type allowances
    variant("string_case_punct", lambda new: first_of(new, (str,), lambda v: f" {v.upper()}. "))
    variant("string_bang", lambda new: first_of(new, (str,), lambda v: v + "!"))
    variant("bool_for_int", lambda new: first_of(new, (int,), lambda v: True))
    variant("float_for_int", lambda new: first_of(new, (int,), lambda v: v + 0.0))
    variant("null_value", lambda new: first_of(new, (str, int, float, bool, list, dict), lambda v: None))
    variant("list_reversed", lambda new: first_of(new, (list,), lambda v: v[::-1] if len(v) > 1 else _SKIP))
    variant("list_items_as_strings", lambda new: first_of(new, (list,), lambda v: [str(x) for x in v] or _SKIP))
    if lang != "python":
        def source_variant(v: str) -> str:
            if v.endswith(("L", "f", "n")) and v[:-1].lstrip("-").replace(".", "", 1).isdigit():
                return v[:-1]
            if v.lstrip("-").isdigit():
                return v + ".0"
            if v in ("true", "false"):
                return v.capitalize()
            return f'"{v}"'
        variant("source_literal", lambda new: first_of(new, (str,), source_variant))
    return out


def _official_verdict(official, case, decoded) -> tuple[bool | None, str]:
    ast_checker, _, langs = official
    try:
        res = ast_checker(case.meta["functions"], decoded, case.meta["answers"], langs[case.meta["language"]],
                          case.category, "stub_model")
    except Exception as exc:  # noqa: BLE001  (the official code crashes on some inputs)
        return None, f"{type(exc).__name__}: {exc}"
    return bool(res["valid"]), res.get("error_type", "")


def test_checker_agrees_with_official_on_every_single_turn_case(official, cases):
    start = time.perf_counter()
    ast_cases = [c for c in cases if c.category not in IRRELEVANCE]
    compared = agree = gold_valid = official_crashes = error_type_same = 0
    per_kind: dict[str, int] = {}
    disagreements = []
    for case in ast_cases:
        gold = gold_calls(case.meta["functions"], case.meta["answers"], case.meta["language"])
        variants = {"gold": gold, **perturbations(case, gold)}
        assert len(variants) >= 6, f"{case.id}: only {len(variants)} variants"
        for kind, calls in variants.items():
            response = answer_text("checking", calls) if calls else "<think> none </think>\n<tool_call>\n</tool_call>"
            decoded, why = decode_calls(response)
            assert decoded is not None, f"{case.id}/{kind}: our own rendering did not decode: {why}"
            ours = check(case.meta["functions"], decoded, case.meta["answers"], case.category, case.meta["language"])
            via_eval = score_case(case, response)
            assert via_eval["valid"] == ours["valid"]
            theirs, their_type = _official_verdict(official, case, decoded)
            compared += 1
            per_kind[kind] = per_kind.get(kind, 0) + 1
            if theirs is None:  # official crash: we must call it invalid, never raise
                official_crashes += 1
                theirs = False
            if theirs == ours["valid"]:
                agree += 1
                if ours["valid"] or their_type == ours.get("error_type"):
                    error_type_same += 1
            else:
                disagreements.append((case.id, kind, ours, theirs, their_type))
            if kind == "gold" and ours["valid"]:
                gold_valid += 1
    elapsed = time.perf_counter() - start
    print(f"\nBFCL differential: {len(ast_cases)} AST cases, {compared} responses compared "
          f"({', '.join(f'{k} {v}' for k, v in sorted(per_kind.items()))}); "
          f"agreement {agree}/{compared} = {100 * agree / compared:.2f}%; same error type on "
          f"{error_type_same}/{agree}; gold valid {gold_valid}/{len(ast_cases)}; "
          f"official crashes {official_crashes}; {elapsed:.1f}s")
    assert not disagreements, f"{len(disagreements)} disagreements, first: {disagreements[:5]}"
    assert gold_valid >= 0.99 * len(ast_cases)  # the rest are BFCL answers no call can satisfy


IRRELEVANCE_RESPONSES = {
    "no_call": "<think> none of the tools fits </think>\n<response> I cannot do that. </response>",
    "empty_block": "<think> nothing </think>\n<tool_call>\n</tool_call>",
    "unparsable_block": "<think> x </think>\n<tool_call>\nnot json\n</tool_call>",
    "unclosed_block": '<think> x </think>\n<tool_call>\n{"name": "f", "parameters": {}}',
    "one_call": None,  # filled in with the case's first function
    "two_calls": None,
}


def test_irrelevance_verdicts_follow_the_official_no_call_rule(official, cases):
    _, is_empty_output, _ = official
    compared = 0
    for case in (c for c in cases if c.category in IRRELEVANCE):
        name = case.meta["functions"][0]["name"] if case.meta["functions"] else "f"
        call = ToolCall(name, {})
        responses = dict(IRRELEVANCE_RESPONSES)
        responses["one_call"] = answer_text("calling", [call])
        responses["two_calls"] = answer_text("calling", [call, call])
        for kind, response in responses.items():
            decoded, _ = decode_calls(response)
            official_valid = decoded is None or bool(is_empty_output(decoded))
            assert score_case(case, response)["valid"] == official_valid, (case.id, kind)
            compared += 1
    print(f"\nBFCL irrelevance: {compared} responses agree with the official no-call rule")
    assert compared >= 6 * 1000


# -- random argument values -------------------------------------------------------------------------------------
_scalars = (st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-3, 3, allow_nan=False).map(lambda x: round(x, 1))
            | st.text(alphabet="aAbB 1.,-_'\"!xyz", max_size=6))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["a", "b", "min", "max", "size"]), inner, max_size=3),
                       max_leaves=6)


def _random_argument_case(official, cases, data) -> None:
    ast_cases = [c for c in cases if c.category not in IRRELEVANCE]
    case = data.draw(st.sampled_from(ast_cases), label="case")
    calls = gold_calls(case.meta["functions"], case.meta["answers"], case.meta["language"])
    call = calls[data.draw(st.integers(0, len(calls) - 1), label="call")]
    doc = next((f for f in case.meta["functions"] if f["name"] == call.name), {})
    names = sorted(set(call.parameters) | set(doc.get("parameters", {}).get("properties", {}))) or ["p"]
    param = data.draw(st.sampled_from(names), label="param")
    if case.meta["language"] == "python" or data.draw(st.booleans(), label="non-string"):
        value = data.draw(_values, label="value")
    else:
        value = data.draw(st.text(alphabet="0123456789.-LfntrueTFals\"'[]{}(), :newArayLitHhMp<>", max_size=24))
    call.parameters[param] = value
    decoded, _ = decode_calls(answer_text("fuzz", calls))
    assert decoded is not None
    ours = check(case.meta["functions"], decoded, case.meta["answers"], case.category, case.meta["language"])
    with contextlib.redirect_stdout(io.StringIO()):
        theirs, _ = _official_verdict(official, case, decoded)
    assert (theirs is True) == ours["valid"], (case.id, param, value, ours, theirs)


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(data=st.data())
def test_checker_agrees_with_official_on_random_argument_values(official, cases, data):
    _random_argument_case(official, cases, data)


@pytest.mark.slow
@settings(max_examples=10000, deadline=None, derandomize=True)
@given(data=st.data())
def test_checker_agrees_with_official_on_random_argument_values_10000(official, cases, data):
    _random_argument_case(official, cases, data)
