"""Java / JavaScript argument conversion: hand-computed tables and a differential fuzz against bfcl-eval.

The official converters import only ``bfcl_eval.constants.type_mappings``, so no stub is needed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tasks.toolcall.bfcl_convert import JAVA_TYPES, JS_TYPES, Unconvertible, java_value, js_value

HAVE_BFCL = importlib.util.find_spec("bfcl_eval") is not None

JAVA_TABLE = [
    ("42", "integer", None, 42),
    ("-7", "short", None, -7),
    ("4.0", "integer", None, "4.0"),
    ("12L", "long", None, 12),
    ("12", "long", None, "12"),
    ("1.5f", "float", None, 1.5),
    ("1.5", "float", None, "1.5"),
    ("2.5e3", "double", None, 2500.0),
    ("true", "boolean", None, True),
    ("True", "boolean", None, "True"),
    ("'a'", "char", None, "'a'"),
    ('"quoted"', "String", None, '"quoted"'),
    ("new int[]{1, 2, 3}", "Array", "integer", [1, 2, 3]),
    ("new String[]{a, b}", "Array", "String", ["a", "b"]),
    ('new ArrayList<>(Arrays.asList("x", "y"))', "ArrayList", "String", ["x", "y"]),
    ("new ArrayList<Long>() {{ add(1L); add(2L); }}", "ArrayList", "long", [1, 2]),
    ("new ArrayList<>()", "ArrayList", "String", []),
    ('new HashMap<String, Object>() {{ put("k", 5); put("s", "v"); }}', "HashMap", None, {"k": 5, "s": "v"}),
    ("new HashMap<>()", "HashMap", None, {}),
    ("not a map", "HashMap", None, "not a map"),
]

JS_TABLE = [
    ("42", "integer", None, 42),
    ("4.5", "integer", None, "4.5"),
    ("4.5", "float", None, 4.5),
    ("1e3", "float", None, "1e3"),
    ("10n", "Bigint", None, 10),
    ("false", "Boolean", None, False),
    ("'hi'", "String", None, "hi"),
    ('"hi\'', "String", None, '"hi\''),
    ("[1, 'two', true]", "array", None, [1, "two", True]),
    ("[1, 2]", "array", "integer", [1, 2]),
    ("new Array(3, 4)", "array", "integer", [3, 4]),
    ("[[1, 2], [3]]", "array", None, [[1, 2], [3]]),
    ("{a: 1, b: 'x'}", "dict", None, {"a": 1, "b": "x"}),
    ("{}", "dict", None, {}),
    ("plain", "any", None, "plain"),
]


@pytest.mark.parametrize("text,declared,item,expected", JAVA_TABLE)
def test_java_conversion_table(text, declared, item, expected):
    assert java_value(text, declared, item) == expected


@pytest.mark.parametrize("text,declared,item,expected", JS_TABLE)
def test_js_conversion_table(text, declared, item, expected):
    assert js_value(text, declared, item) == expected


@pytest.mark.parametrize("declared", ["Set", "Hashtable", "Queue", "Stack", "Object"])
def test_unconvertible_java_types_raise_our_own_error(declared):
    with pytest.raises(Unconvertible):
        java_value("x", declared)


# -- differential fuzz ----------------------------------------------------------------------------------------
PIECES = ["1", "-2", "3.5", "0", "1e3", "L", "l", "f", "F", "n", "true", "false", "'a'", '"s"', ",", " ", "[", "]",
          "{", "}", "(", ")", ":", "new int[]{", "new String[]{", "new ArrayList<>(Arrays.asList(",
          "new ArrayList<Integer>() {{ add(", "); ", "}}", "new HashMap<String, Object>() {{ put(\"k\", ",
          "new Array(", "x", "\n", "nan", "_"]
texts = st.lists(st.sampled_from(PIECES), max_size=8).map("".join) | st.text(max_size=12)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and repr(a) == repr(b)


def _run(fn, *args):
    try:
        return True, fn(*args)
    except Exception as exc:  # noqa: BLE001  (comparing failure behaviour)
        return False, type(exc).__name__


@pytest.mark.skipif(not HAVE_BFCL, reason="bfcl-eval is not installed")
@settings(max_examples=1500, deadline=None, derandomize=True)
@given(text=texts, declared=st.sampled_from(sorted(set(JAVA_TYPES) - {"Set", "Hashtable", "Queue", "Stack"})),
       item=st.sampled_from([None, "integer", "long", "String", "char", "boolean", "double", "float", "any"]))
def test_java_conversion_matches_official(text, declared, item):
    from bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter import java_type_converter

    ok_ours, ours = _run(java_value, text, declared, item)
    ok_theirs, theirs = _run(java_type_converter, text, declared, item)
    assert ok_ours == ok_theirs, (text, declared, item, ours, theirs)
    if ok_ours:
        assert _same(ours, theirs), (text, declared, item, ours, theirs)


@pytest.mark.skipif(not HAVE_BFCL, reason="bfcl-eval is not installed")
@settings(max_examples=1500, deadline=None, derandomize=True)
@given(text=texts, declared=st.sampled_from(sorted(JS_TYPES)),
       item=st.sampled_from([None, "integer", "float", "String", "Boolean", "Bigint", "any", "dict", "array"]))
def test_js_conversion_matches_official(text, declared, item):
    from bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter import js_type_converter

    ok_ours, ours = _run(js_value, text, declared, item)
    with contextlib.redirect_stdout(io.StringIO()):  # the official dict parser prints its own errors
        ok_theirs, theirs = _run(js_type_converter, text, declared, item)
    assert ok_ours == ok_theirs, (text, declared, item, ours, theirs)
    if ok_ours:
        assert _same(ours, theirs), (text, declared, item, ours, theirs)
