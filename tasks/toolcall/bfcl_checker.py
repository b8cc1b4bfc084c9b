"""BFCL-v4 single-turn AST checker, written for this project to the official semantics.

Input shapes are BFCL's: ``functions`` is the case's list of function documents, ``calls`` the
decoded model output ``[{name: {param: value}}, ...]`` and ``answers`` the possible answers
``[{name: {param: [acceptable values]}}, ...]`` (``""`` among the acceptable values marks an
optional parameter that may be left out). Output: ``{"valid", "error", "error_type"}`` with the
official namespaced error types.

Dispatch by category: ``parallel`` in the name -> order-free matching (each possible answer, in
order, takes the first unused call that passes; generic ``cannot_find_match`` on failure; the call
count must equal the answer count); else ``multiple`` -> exactly one call, checked against the
function the answer names; else exactly one call against the first function.

One call against one answer (:func:`check_call`):
1. the function's name must be a key of the call; every ``required`` parameter present;
2. every given parameter must be declared and have possible answers;
3. Java / JavaScript values must be strings and are converted by their declared type
   (:mod:`tasks.toolcall.bfcl_convert`); in Python an int is accepted for a float;
4. type check: exact Python type (bool is not int); a value of the possible answers' own type
   is accepted as a "variable" when that type differs from the declared one; arrays/tuples check
   their items one level deep; numbers or booleans written as strings fail;
5. value check: strings compare after deleting spaces and ``, . / - _ * ^``, lower-casing and
   turning ``'`` into ``"``; lists compare element-wise after the same normalisation of string
   items (order-sensitive); dicts (and lists of dicts) key by key; everything else by ``==``
   against the acceptable list;
6. a possible-answer parameter not given fails unless ``""`` is acceptable.

Unlike the official code, nothing here raises on model output: any unexpected failure (the
official code would crash) is reported as ``valid: False`` with error type ``checker:exception``.
"""

from __future__ import annotations

import re
from typing import Any

from tasks.toolcall.bfcl_convert import JAVA_TYPES, JS_TYPES, java_value, js_value

PYTHON_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool, "array": list, "tuple": list,
    "dict": dict, "any": str,
}
PYTHON_NESTED = ("array", "tuple")
JAVA_NESTED = ("Array", "ArrayList", "array")

_STRIP = re.compile(r"[ ,./\-_*^]")


def normalize_string(text: str) -> str:
    """Delete spaces and ``, . / - _ * ^``, lower-case, and write ``'`` as ``"``."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _norm(value: Any) -> Any:
    return normalize_string(value) if type(value) is str else value


def _fail(error_type: str, message: str) -> dict[str, Any]:
    return {"valid": False, "error": [message], "error_type": error_type}


OK: dict[str, Any] = {"valid": True, "error": []}


# -- types ----------------------------------------------------------------------------------------------
def _answer_type(acceptable: Any) -> type | None:
    """Type of the first acceptable value that is not ``""`` (None if all are ``""``)."""
    for value in acceptable:
        if value != "":
            return type(value)
    return None


def type_check(param: str, value: Any, acceptable: Any, expected: type, nested: type | None) -> dict[str, Any]:
    """Step 4 of the module docstring -> {valid, error, error_type?, is_variable}."""
    answer_type = _answer_type(acceptable)
    is_variable = answer_type is not None and answer_type != expected
    nested_failed = False
    if type(value) is expected:
        if nested is None:
            return {"valid": True, "error": [], "is_variable": is_variable}
        for option in acceptable:
            ok = True
            if type(option) is list:
                ok = all(type_check(param, item, option, nested, None)["valid"] for item in value)
            if ok:
                return {"valid": True, "error": [], "is_variable": is_variable}
        nested_failed = True
    if answer_type is not None and type(value) is answer_type:
        if nested_failed:
            return {**_fail("type_error:nested", f"items of {param!r} have the wrong type"), "is_variable": True}
        return {"valid": True, "error": [], "is_variable": True}
    return {**_fail("type_error:simple", f"{param!r} should be {expected.__name__}, got {type(value).__name__}"),
            "is_variable": False}


# -- values ----------------------------------------------------------------------------------------------
def check_string(param: str, value: str, acceptable: list[Any]) -> dict[str, Any]:
    if normalize_string(value) in [normalize_string(a) for a in acceptable if type(a) is str]:
        return OK
    return _fail("value_error:string", f"{param!r}: {value!r} is not one of {acceptable}")


def check_list(param: str, value: list[Any], acceptable: list[Any]) -> dict[str, Any]:
    given = [_norm(v) for v in value]
    options = [[_norm(option[j]) for j in range(len(option))] for option in acceptable]
    if given in options:
        return OK
    return _fail("value_error:list/tuple", f"{param!r}: {value!r} is not one of {acceptable}")


def check_dict(param: str, value: dict[str, Any], acceptable: list[Any]) -> dict[str, Any]:
    """Each key of ``value`` must be allowed with an acceptable value; each required key present."""
    result = _fail("dict_checker:unclear", f"{param!r}: no acceptable dict")
    for option in acceptable:
        if option == "":
            continue
        result = _fail("dict_checker:unclear", f"{param!r}: no acceptable dict")
        ok = True
        for key, item in value.items():
            if key not in option:
                result = _fail("value_error:dict_key", f"{param!r}: unexpected key {key!r}")
                ok = False
                break
            allowed = [_norm(a) for a in option[key]]
            if _norm(item) not in allowed:
                result = _fail("value_error:dict_value", f"{param!r}: {key!r}={item!r} not in {allowed}")
                ok = False
                break
        for key, allowed in option.items():
            if key not in value and "" not in allowed:
                result = _fail("value_error:dict_key", f"{param!r}: missing key {key!r}")
                ok = False
                break
        if ok:
            return OK
    return result


def check_list_of_dicts(param: str, value: list[Any], acceptable: list[Any]) -> dict[str, Any]:
    result = _fail("list_dict_checker:unclear", f"{param!r}: no acceptable list of dicts")
    for option in acceptable:
        if len(value) != len(option):
            result = _fail("value_error:list_dict_count", f"{param!r}: wrong number of dicts")
            continue
        ok = True
        for i, item in enumerate(value):
            result = check_dict(param, item, [option[i]])
            if not result["valid"]:
                ok = False
                break
        if ok:
            return OK
    return result


# -- one call ---------------------------------------------------------------------------------------------
def _expected_types(language: str, declared: str, schema: dict[str, Any]) -> tuple[type, type | None]:
    if language == "java":
        nested = JAVA_TYPES[schema["items"]["type"]] if declared in JAVA_NESTED else None
        return JAVA_TYPES[declared], nested
    if language == "javascript":
        nested = JS_TYPES[schema["items"]["type"]] if declared in JAVA_NESTED else None
        return JS_TYPES[declared], nested
    nested = PYTHON_TYPES[schema["items"]["type"]] if declared in PYTHON_NESTED else None
    return PYTHON_TYPES[declared], nested


def check_call(function: dict[str, Any], call: dict[str, Any], answer: dict[str, Any], language: str) -> dict[str, Any]:
    """One decoded call ``{name: params}`` against one possible answer ``{name: {param: [values]}}``."""
    acceptable_by_param = next(iter(answer.values()))
    name = function["name"]
    properties = function["parameters"]["properties"]
    if name not in call:
        return _fail("simple_function_checker:wrong_func_name", f"function {name!r} not called")
    given = call[name]
    for param in function["parameters"]["required"]:
        if param not in given:
            return _fail("simple_function_checker:missing_required", f"missing required parameter {param!r}")
    for param, value in given.items():
        if param not in properties or param not in acceptable_by_param:
            return _fail("simple_function_checker:unexpected_param", f"unexpected parameter {param!r}")
        declared = properties[param]["type"]
        expected, nested = _expected_types(language, declared, properties[param])
        if language in ("java", "javascript"):
            if type(value) is not str:
                tag = "type_error:java" if language == "java" else "type_error:js"
                return _fail(tag, f"{param!r} must be a string in {language} syntax, got {type(value).__name__}")
            item_type = properties[param]["items"]["type"] if declared in JAVA_NESTED else None
            convert = java_value if language == "java" else js_value
            value = convert(value, declared, item_type)
        if declared == "tuple" and type(value) is tuple:
            value = list(value)
        if language == "python" and declared == "float" and type(value) is int:
            value = float(value)
        acceptable = acceptable_by_param[param]
        typed = type_check(param, value, acceptable, expected, nested)
        if not typed["valid"]:
            return {k: typed[k] for k in ("valid", "error", "error_type")}
        if not typed["is_variable"]:
            if expected is dict:
                verdict = check_dict(param, value, acceptable)
            elif expected is list and nested is dict:
                verdict = check_list_of_dicts(param, value, acceptable)
            elif expected is str:
                verdict = check_string(param, value, acceptable)
            elif expected is list:
                verdict = check_list(param, value, acceptable)
            else:
                verdict = None
            if verdict is not None:
                if not verdict["valid"]:
                    return verdict
                continue
        if value not in acceptable:
            return _fail("value_error:others", f"{param!r}: {value!r} is not one of {acceptable}")
    for param, acceptable in acceptable_by_param.items():
        if param not in given and "" not in acceptable:
            return _fail("simple_function_checker:missing_optional",
                         f"parameter {param!r} left out but not marked optional")
    return OK


# -- dispatch ----------------------------------------------------------------------------------------------
def _function_named(functions: Any, name: str) -> Any:
    if isinstance(functions, list):
        return next((f for f in functions if f["name"] == name), None)
    return functions


def _check_parallel(functions: list[Any], calls: list[Any], answers: list[Any], language: str) -> dict[str, Any]:
    if len(calls) != len(answers):
        return _fail("parallel_function_checker_no_order:wrong_count", "wrong number of calls")
    used: set[int] = set()
    for i, answer in enumerate(answers):
        function = _function_named(functions, next(iter(answer)))
        for j, call in enumerate(calls):
            if j not in used and check_call(function, call, answer, language)["valid"]:
                used.add(j)
                break
        else:
            return _fail("parallel_function_checker_no_order:cannot_find_match",
                         f"no call matches possible answer {i}")
    return OK


def check(functions: list[Any], calls: list[Any], answers: list[Any], category: str, language: str) -> dict[str, Any]:
    """The official AST verdict for one case (module docstring). Never raises."""
    try:
        if "parallel" in category:
            return _check_parallel(functions, calls, answers, language)
        if "multiple" in category:
            if len(calls) != len(answers):
                return _fail("multiple_function_checker:wrong_count", "wrong number of calls")
            function = _function_named(functions, next(iter(answers[0])))
            return check_call(function, calls[0], answers[0], language)
        if len(calls) != 1:
            return _fail("simple_function_checker:wrong_count", "wrong number of calls")
        return check_call(functions[0], calls[0], answers[0], language)
    except Exception as exc:  # noqa: BLE001  (official code would crash; never raise on model output)
        return _fail("checker:exception", f"{type(exc).__name__}: {str(exc)[:200]}")


def language_of(category: str) -> str:
    """python, java or javascript, from the category name."""
    if "javascript" in category:
        return "javascript"
    if "java" in category:
        return "java"
    return "python"
