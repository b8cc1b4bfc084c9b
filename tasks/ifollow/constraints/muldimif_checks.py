"""MulDimIF constraint types (``muldimif:*``) for content, language, length and plain-text format:
the programmatic checks its natural-language constraints are parsed into (:mod:`muldimif_parse`).
Markdown, table, list, JSON and XML checks are in :mod:`muldimif_structure`.

Bounds are ``min`` / ``max`` kwargs, either absent (unbounded); ``exact n`` is ``min = max = n``.
``scope`` is ``"response"`` (the default) or ``"each"`` (every element: table rows, else list
items, else paragraphs — :func:`muldimif_text.elements`). How words, sentences, paragraphs,
tables, headings, JSON and XML are read is stated in :mod:`muldimif_text`. These are our reading
of MulDimIF's constraint forms, not a replica of its official rule list.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from tasks.ifollow.constraints import muldimif_text as mt
from tasks.ifollow.constraints.base import CheckResult
from tasks.ifollow.constraints.ifbench_common import ifbench_type, punkt_sentences

FAMILY = "muldimif"


def constraint(cid: str, params: tuple[str, ...], render: Any, required: tuple[str, ...] = ()) -> Any:
    return ifbench_type(cid, params, render, required=required, family=FAMILY)


def within(value: float, lo: Any = None, hi: Any = None) -> bool:
    """lo <= value <= hi, each bound optional."""
    return (lo is None or value >= float(lo)) and (hi is None or value <= float(hi))


def bound_phrase(kw: dict[str, Any], unit: str) -> str:
    lo, hi = kw.get("min"), kw.get("max")
    if lo is not None and hi is not None:
        return f"exactly {lo} {unit}" if lo == hi else f"between {lo} and {hi} {unit}"
    if lo is not None:
        return f"at least {lo} {unit}"
    if hi is not None:
        return f"at most {hi} {unit}"
    return f"any number of {unit}"


def _scope_text(kw: dict[str, Any]) -> str:
    return "Each item" if kw.get("scope") == "each" else "The response"


def _units(response: str, scope: str | None) -> list[str]:
    return mt.elements(response) if scope == "each" else [response]


# -- content -------------------------------------------------------------------------------------
def keyword_pattern(keyword: str) -> re.Pattern[str]:
    """MulDimIF's keyword match: a keyword with a CJK ideograph is a plain, case-sensitive substring;
    any other is matched case-insensitively with no word character just before or after it."""
    k = str(keyword)
    if any("\u4e00" <= ch <= "\u9fff" for ch in k):
        return re.compile(re.escape(k))
    return re.compile(r"(?<!\w)" + re.escape(k) + r"(?!\w)", re.IGNORECASE)


def _keyword_rule(text: str, keywords: list[str], min_count: int, any_of: bool, end_period: bool,
                  capitalized: bool, min_words: int | None, max_words: int | None) -> str | None:
    """Why ``text`` fails the keyword rule, or None when it holds (MulDimIF's rule order)."""
    if capitalized and any(not w[0].isupper() for w in text.split()):
        return "a word is not capitalized"
    if end_period and not text.strip().endswith("."):
        return "does not end with a period"
    n_words = len(text.split())
    if not within(n_words, min_words, max_words):
        return f"{n_words} words"
    counts = [len(keyword_pattern(k).findall(text)) for k in keywords]
    ok = any(c >= min_count for c in counts) if any_of else all(c >= min_count for c in counts)
    return None if ok else f"keyword counts {counts} (need {min_count}{' of any' if any_of else ' each'})"


@constraint("muldimif:keywords:include",
            ("keywords", "min_count", "any_of", "scope", "target", "end_period", "capitalized", "min_words", "max_words",
             "exclude"),
            lambda kw: (f"Each {kw.get('target', 'item')}" if kw.get("scope") == "each" else "The response")
            + " must include " + (" or " if kw.get("any_of") else " and ").join(f"'{k}'" for k in kw["keywords"]) + ".",
            required=("keywords",))
def keywords_include(response: str, keywords: list[str], min_count: int = 1, any_of: bool = False,
                     scope: str = "response", target: str | None = None, end_period: bool = False,
                     capitalized: bool = False, min_words: int | None = None,
                     max_words: int | None = None, exclude: list[str] | None = None) -> CheckResult:
    """Every keyword (with ``any_of``: some keyword) occurs at least ``min_count`` times, plus the
    extra conditions the same sentence states (ends with a period, words capitalised, word count);
    no keyword of ``exclude`` may occur ("includes 'X' and avoids 'Y'").

    ``scope="each"``: the rule holds for every element — MulDimIF's elements for ``target``
    (:func:`muldimif_text.each_elements`), or ours (:func:`muldimif_text.elements`) when the text
    names no "each <target> must" (the official checker fails those outright; we check them).
    """
    for k in exclude or []:
        if keyword_pattern(k).search(response):
            return CheckResult(False, f"'{k}' must be avoided", [])
    rule = (keywords, int(min_count), bool(any_of), bool(end_period), bool(capitalized), min_words, max_words)
    if scope == "each":
        units = mt.each_elements(response, target) if target else mt.elements(response)
        if not units:
            return CheckResult(False, "no element to check", [])
        for unit in units:
            why = _keyword_rule(unit, *rule)
            if why:
                return CheckResult(False, f"element {unit[:40]!r}: {why}", [])
        return CheckResult(True, f"all {len(units)} elements hold", [])
    why = _keyword_rule(response, *rule)
    spans = sorted(m.span() for k in keywords for m in keyword_pattern(k).finditer(response))
    return CheckResult(why is None, why or "all keywords present", spans)


@constraint("muldimif:keywords:exclude", ("keywords",),
            lambda kw: "The response must not include " + ", ".join(f"'{k}'" for k in kw["keywords"]) + ".")
def keywords_exclude(response: str, keywords: list[str]) -> CheckResult:
    """No keyword occurs (case-insensitive, whole words)."""
    for k in keywords:
        m = keyword_pattern(k).search(response)
        if m:
            return CheckResult(False, f"'{k}' occurs", [m.span()])
    return CheckResult(True, "none of the keywords occurs", [])


@constraint("muldimif:keywords:unstated", ("text",), lambda kw: str(kw["text"]))
def keywords_unstated(response: str, text: str) -> CheckResult:
    """A content constraint that names no keyword ("include the names of key players"): nothing can
    be matched, so any non-empty response passes (the official rule then holds an empty keyword
    list, which every text satisfies). Listed by :func:`muldimif_parse.coverage` as unverifiable."""
    return CheckResult(True, "no keyword stated: not programmatically checkable", [])


_UNIT_TEXT = {"response": "The response", "sentences": "Each sentence", "lines": "Each paragraph",
              "cells": "Each table entry", "bullets": "Each bullet point"}


def punctuation_units(response: str, unit: str) -> list[str]:
    """The stretches whose last character MulDimIF's punctuation rule reads.

    ``response``: the stripped response; ``sentences``: its Punkt sentences; ``lines``: its
    non-empty stripped lines; ``cells``: the cells of every line after the first two (header and
    separator), split on '|', dropping blank and all-dash cells.
    """
    text = response.strip()
    if unit == "sentences":
        return [s.strip() for s in punkt_sentences(text)]
    if unit == "lines":
        return [ln.strip() for ln in text.split("\n") if ln.strip()]
    if unit == "cells":
        rows = text.split("\n")
        rows = rows[2:] if len(rows) > 1 else rows
        cells = [c.strip() for row in rows for c in re.split(r"\s*\|\s*", row.strip("|")) if c.strip()]
        return [c for c in cells if c.strip("-")]
    return [text]


@constraint("muldimif:punctuation:ending", ("marks", "unit", "negate"),
            lambda kw: _UNIT_TEXT.get(kw.get("unit", "response"), "The response")
            + (" must not end with " if kw.get("negate") else " must end with ")
            + " or ".join(f"'{m}'" for m in kw["marks"]) + ".", required=("marks",))
def punctuation_ending(response: str, marks: list[str], unit: str = "response", negate: bool = False) -> bool:
    """Every unit's last character is one of ``marks`` (with ``negate``: none is).

    MulDimIF's rule: no Markdown is stripped, so "**Done.**" does not end with a period. With
    ``unit="bullets"`` every Punkt sentence of every bullet line (``-``, ``*``, ``•``) must end
    with the first mark.
    """
    allowed = set(marks)
    if unit == "bullets":
        bullets = re.findall(r"^[-*•]\s.*$", response.strip(), re.MULTILINE)
        return all(s.strip().endswith(marks[0]) for b in bullets for s in punkt_sentences(b))
    units = punctuation_units(response, unit)
    if negate:
        return all(u[-1] not in allowed for u in units if u)
    return all(u and u[-1] in allowed for u in units)


@constraint("muldimif:identifiers:starts_with", ("prefix", "scope"),
            lambda kw: f"{_scope_text(kw)} must start with '{kw['prefix']}'.", required=("prefix",))
def starts_with(response: str, prefix: str, scope: str = "response") -> bool:
    """MulDimIF's rule: the response, with leading spaces and '#' removed, starts with ``prefix``
    (case-insensitive); with ``scope="each"`` ("Each example must start with 'Example:'") the
    prefix need only occur somewhere."""
    if scope == "each":
        return str(prefix) in response
    return response.lstrip(" #").lower().startswith(str(prefix).lower())


@constraint("muldimif:identifiers:name_initial", ("letter",),
            lambda kw: f"The name must start with the letter '{kw['letter']}'.")
def name_initial(response: str, letter: str) -> bool:
    """MulDimIF's rule: some word starts with the capital ``letter`` (``\\bP[a-zA-Z]*\\b``)."""
    return re.search(r"\b" + re.escape(str(letter).upper()) + r"[a-zA-Z]*\b", response) is not None


# -- language ------------------------------------------------------------------------------------
def _case_scope(response: str, scope: str) -> str:
    """The text a case rule reads: heading texts or table cells when the constraint names them
    (falling back to the whole response when there are none), else the whole response."""
    if scope == "headings":
        found = [re.sub(r"^\s*#+\s*", "", h) for _, h in mt.headings(response)]
        return " ".join(found) if found else response
    if scope == "table":
        cells = [c for t in mt.tables(response) for c in t.header + [x for row in t.rows for x in row]]
        return " ".join(cells) if cells else response
    return response


@constraint("muldimif:language:capitalized", ("scope",),
            lambda kw: {"headings": "Each word in the headings", "table": "Each word in the table"}
            .get(kw.get("scope", ""), "Each word of the response") + " must be capitalized.")
def capitalized(response: str, scope: str = "response") -> CheckResult:
    """No whitespace token starts with a lower-case ASCII letter (MulDimIF's rule: tokens starting
    with a digit, punctuation or a capital pass), in the scoped text."""
    for token in _case_scope(response, scope).split():
        if "a" <= token[0] <= "z":
            return CheckResult(False, f"'{token}' is not capitalized", [])
    return CheckResult(True, "every word capitalized", [])


@constraint("muldimif:language:uppercase", ("scope",), "The response must be written in all uppercase letters.")
def uppercase(response: str, scope: str = "response") -> bool:
    """The scoped text equals its upper-cased form (MulDimIF's rule)."""
    text = _case_scope(response, scope)
    return text == text.upper()


@constraint("muldimif:language:lowercase", ("scope",), "The response must be written in all lowercase letters.")
def lowercase(response: str, scope: str = "response") -> bool:
    """The scoped text equals its lower-cased form (MulDimIF's rule)."""
    text = _case_scope(response, scope)
    return text == text.lower()


@functools.lru_cache(maxsize=2)
def _converter(config: str):
    """OpenCC (pure-Python reimplementation, Apache-2.0): "s2t" simplified->traditional, "t2s" back."""
    from opencc import OpenCC

    return OpenCC(config)


@constraint("muldimif:language:chinese", ("variant", "mode"),
            lambda kw: f"The response must {'be written entirely in' if kw.get('mode') == 'entirely' else 'use'} "
                       f"{kw['variant'].capitalize()} Chinese.", required=("variant",))
def chinese(response: str, variant: str, mode: str = "has") -> CheckResult:
    """MulDimIF's rule. ``mode="has"``: some character is specific to ``variant`` (it changes when
    converted to the other script). ``mode="entirely"``: no Latin letter, and converting the whole
    text to ``variant`` changes nothing. Conversion tables: OpenCC (MulDimIF uses zhconv, whose
    tables are close but not identical)."""
    to_variant = _converter("s2t" if variant == "traditional" else "t2s")
    to_other = _converter("t2s" if variant == "traditional" else "s2t")
    if mode == "entirely":
        if re.search(r"[A-Za-z]", response):
            return CheckResult(False, "Latin letters present", [])
        return CheckResult(to_variant.convert(response) == response, f"entirely {variant}?", [])
    hits = [ch for ch in response if "\u3400" <= ch <= "\u9fff" and to_other.convert(ch) != ch]
    return CheckResult(bool(hits), f"{len(hits)} {variant}-specific characters", [])


# -- length --------------------------------------------------------------------------------------
@constraint("muldimif:length:words", ("min", "max", "scope", "target", "keywords"),
            lambda kw: f"{_scope_text(kw)} must contain {bound_phrase(kw, 'words')}.")
def length_words(response: str, min: int | None = None, max: int | None = None, scope: str = "response",
                 target: str | None = None, keywords: list[str] | None = None) -> CheckResult:
    """Word count (:func:`muldimif_text.count_words`) of the response within [min, max]; with
    ``scope="each"``, the whitespace-token count of every element of
    :func:`muldimif_text.word_limit_elements` (MulDimIF's rule; no element fails). Words quoted in
    the constraint (``keywords``) must also occur, as MulDimIF's whole-response rule requires."""
    if scope == "each":
        units = mt.word_limit_elements(response, target)
        if not units:
            return CheckResult(False, "no element to check", [])
        bad = [u for u in units if not within(len(u.split()), min, max)]
        return CheckResult(not bad, f"{len(bad)} of {len(units)} elements out of bounds", [])
    missing = [k for k in keywords or [] if not keyword_pattern(k).search(response)]
    if missing:
        return CheckResult(False, f"quoted word(s) {missing} missing", [])
    n = mt.count_words(response)
    return CheckResult(within(n, min, max), f"{n} words", [])


@constraint("muldimif:length:sentences", ("min", "max", "scope"),
            lambda kw: f"{_scope_text(kw)} must contain {bound_phrase(kw, 'sentences')}.")
def length_sentences(response: str, min: int | None = None, max: int | None = None,
                     scope: str = "response") -> bool:
    """Prose sentence count of the response, or of every element, within [min, max]."""
    return all(within(len(mt.sentences(u)), min, max) for u in _units(response, scope))


@constraint("muldimif:length:characters", ("min", "max", "scope"),
            lambda kw: f"{_scope_text(kw)} must contain {bound_phrase(kw, 'characters')}.")
def length_characters(response: str, min: int | None = None, max: int | None = None,
                      scope: str = "response") -> bool:
    """Character count (surrounding whitespace stripped) of the response, or of every element, within [min, max]."""
    return all(within(len(u.strip()), min, max) for u in _units(response, scope))


@constraint("muldimif:length:paragraphs", ("min", "max"),
            lambda kw: f"The response must contain {bound_phrase(kw, 'paragraphs')}.")
def length_paragraphs(response: str, min: int | None = None, max: int | None = None) -> bool:
    """Number of blank-line-separated blocks within [min, max]."""
    return within(len(mt.paragraphs(response)), min, max)


@constraint("muldimif:format:blurb", ("max_chars",), "The response should be concise, resembling a short blurb.")
def blurb(response: str, max_chars: int = 200) -> bool:
    """MulDimIF's "short blurb": at most ``max_chars`` characters (default 200)."""
    return len(response) <= int(max_chars)


@constraint("muldimif:format:no_bullets", (), "Do not use bullet points.")
def no_bullets(response: str) -> bool:
    """MulDimIF's rule: no line starts (after indentation) with '-' or '*' (so "-5" and "**bold**"
    at a line start count as bullets too)."""
    return re.search(r"^\s*[-*]", response, re.MULTILINE) is None


@constraint("muldimif:format:full_sentences", (), "The response must be written in full sentences.")
def full_sentences(response: str) -> bool:
    """MulDimIF holds "full sentences" for every response (its checker has no test for it); we do
    the same, so that accuracy stays comparable."""
    return True
