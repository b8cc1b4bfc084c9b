"""Every IFEval instruction id (25), with IFEval's semantics; loose checking is in ``base.check``.

Semantics (as the official evaluator defines them; re-implemented here, not copied):

- Relations ``"less than"`` (count < N) and ``"at least"`` (count >= N); anything else fails.
- ``keywords:existence`` / ``keywords:frequency``: the keyword is searched as a
  case-insensitive regular expression anywhere (substring: "the" matches "there");
  ``keywords:forbidden_words``: a whole-word (``\\b...\\b``) case-insensitive match fails.
- ``keywords:letter_frequency``: occurrences of the (lower-cased) letter in the lower-cased text.
- Words: ``\\w+`` matches; sentences: Punkt (``textutil``); capital words: tokens of
  ``nltk.word_tokenize`` that are ``str.isupper()``.
- Paragraphs: split on ``***`` with an optional whitespace char each side; empty first/last
  pieces are dropped, an empty inner piece fails. ``nth_paragraph_first_word`` splits on
  ``\\n\\n`` instead; its first word is the paragraph's first whitespace token with leading
  quotes removed, cut at the first of ``. , ? ! ' "``, lower-cased.
- Bullets: lines matching ``^\\s*\\*[^*]`` or ``^\\s*-``; the count must equal N.
- Highlights: ``*text*`` spans without newline or inner ``*`` with non-blank text, plus
  ``**text**`` spans the same way (a bold span counts once, through the second rule: the
  first sees only empty ``**`` pairs in it); at least N.
- Sections: split on ``\\s?{splitter}\\s?\\d+\\s?``; sections = pieces - 1, at least N.
- Postscript: ``P.S.`` → ``\\s*p\\.\\s?s\\..*$``, ``P.P.S`` → ``\\s*p\\.\\s?p\\.\\s?s.*$``, other
  markers literally (as a regex), line-anchored at the end, case-insensitive (so "P.P.S."
  also satisfies "P.S.").
- Language checks (response language, all-capital, all-lowercase): langdetect (seeded);
  when langdetect cannot decide, the check passes, as upstream.

One deliberate difference: for ``keywords:letter_frequency`` with a "letter" that is not an
ASCII letter (IFEval has a prompt asking for "#"), the official code silently replaces it by a
random letter, unseeded; we count the character the prompt names. Everything else agrees with
the official code on 15,066 (instruction, response) pairs (``tests/test_ifeval_official_diff.py``).
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Callable
from typing import Any

from tasks.ifollow import textutil as tu
from tasks.ifollow.constraints import linear_scan as ls
from tasks.ifollow.constraints.base import CheckResult, ConstraintType, register

RELATIONS = ("less than", "at least")
CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")

Checker = Callable[[str, dict[str, Any]], CheckResult]


def _compare(count: int, relation: Any, n: Any, what: str) -> CheckResult:
    if relation not in RELATIONS:
        return CheckResult(False, f"unknown relation {relation!r} (known: {', '.join(RELATIONS)})")
    try:
        n = int(n)
    except (TypeError, ValueError):
        return CheckResult(False, f"bad threshold {n!r}")
    ok = count < n if relation == "less than" else count >= n
    return CheckResult(ok, f"{count} {what}, need {relation} {n}")


def _whole(text: str) -> list[tuple[int, int]]:
    return [(0, len(text))] if text else []


def _search_all(pattern: str, text: str, flags: int = re.IGNORECASE) -> list[tuple[int, int]]:
    """Spans of a pattern used as IFEval uses it: as a regex; falls back to a literal if invalid."""
    try:
        rx = re.compile(pattern, flags)
    except re.error:
        rx = re.compile(re.escape(pattern), flags)
    return [m.span() for m in rx.finditer(text)]


def _lang_ok(text: str, want: str) -> tuple[bool, str]:
    got = tu.detect_language(text)
    if got is None:
        return True, "language undetectable (passes, as upstream)"
    return got == want, f"detected {got!r}, want {want!r}"


# -- checkers -----------------------------------------------------------------------------
def _existence(r: str, kw: dict[str, Any]) -> CheckResult:
    spans: list[tuple[int, int]] = []
    for word in kw.get("keywords") or []:
        found = _search_all(str(word), r)
        if not found:
            return CheckResult(False, f"keyword {word!r} missing", spans)
        spans.extend(found[:1])
    return CheckResult(True, "all keywords present", spans)


def _frequency(r: str, kw: dict[str, Any]) -> CheckResult:
    found = _search_all(str(kw.get("keyword", "")), r)
    res = _compare(len(found), kw.get("relation"), kw.get("frequency"), f"x {kw.get('keyword')!r}")
    return CheckResult(res.ok, res.reason, found)


def _forbidden(r: str, kw: dict[str, Any]) -> CheckResult:
    spans: list[tuple[int, int]] = []
    bad = []
    for word in sorted(set(kw.get("forbidden_words") or [])):
        hits = _search_all(r"\b" + str(word) + r"\b", r)
        if hits:
            bad.append(word)
            spans.extend(hits)
    return CheckResult(not bad, f"forbidden words used: {bad}" if bad else "no forbidden word", spans or _whole(r))


def _letter_frequency(r: str, kw: dict[str, Any]) -> CheckResult:
    letter = str(kw.get("letter", "")).strip().lower()
    count = collections.Counter(r.lower())[letter] if letter else 0
    spans = [(i, i + 1) for i, ch in enumerate(r.lower()) if ch == letter] if letter else []
    res = _compare(count, kw.get("let_relation"), kw.get("let_frequency"), f"x letter {letter!r}")
    return CheckResult(res.ok, res.reason, spans)


def _response_language(r: str, kw: dict[str, Any]) -> CheckResult:
    ok, why = _lang_ok(r, str(kw.get("language", "")))
    return CheckResult(ok, why, _whole(r))


def _number_sentences(r: str, kw: dict[str, Any]) -> CheckResult:
    res = _compare(tu.count_sentences(r), kw.get("relation"), kw.get("num_sentences"), "sentences")
    return CheckResult(res.ok, res.reason, tu.sentence_spans(r))


def _star_paragraphs(r: str) -> tuple[list[tuple[int, int]], bool]:
    """Paragraph spans separated by ``\\s?***\\s?``; False if an inner paragraph is empty."""
    pieces, start = [], 0
    for m in re.finditer(r"\s?\*\*\*\s?", r):
        pieces.append((start, m.start()))
        start = m.end()
    pieces.append((start, len(r)))
    kept, valid = [], True
    for i, (s, e) in enumerate(pieces):
        if not r[s:e].strip():
            if 0 < i < len(pieces) - 1:
                valid = False
            continue
        kept.append((s, e))
    return kept, valid


def _number_paragraphs(r: str, kw: dict[str, Any]) -> CheckResult:
    kept, valid = _star_paragraphs(r)
    if not valid:
        return CheckResult(False, "an empty paragraph between two *** separators", kept)
    want = kw.get("num_paragraphs")
    return CheckResult(len(kept) == _int(want), f"{len(kept)} paragraphs, need exactly {want}", kept)


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _number_words(r: str, kw: dict[str, Any]) -> CheckResult:
    res = _compare(tu.count_words(r), kw.get("relation"), kw.get("num_words"), "words")
    return CheckResult(res.ok, res.reason, _whole(r))


def _nth_paragraph_first_word(r: str, kw: dict[str, Any]) -> CheckResult:
    starts = [0] + [m.end() for m in re.finditer(r"\n\n", r)]
    ends = [m.start() for m in re.finditer(r"\n\n", r)] + [len(r)]
    paragraphs = list(zip(starts, ends))
    count = sum(1 for s, e in paragraphs if r[s:e].strip())
    nth, want_n = _int(kw.get("nth_paragraph")), _int(kw.get("num_paragraphs"))
    if nth is None or want_n is None or nth < 1 or nth > count:
        return CheckResult(False, f"{count} paragraphs, cannot read paragraph {nth}", _whole(r))
    s, e = paragraphs[nth - 1]
    text = r[s:e].strip()
    if not text:
        return CheckResult(False, f"paragraph {nth} is empty", [(s, e)])
    token = text.split()[0].strip().lstrip("'").lstrip('"')
    first = ""
    for ch in token:
        if ch in {".", ",", "?", "!", "'", '"'}:
            break
        first += ch.lower()
    want = str(kw.get("first_word", "")).lower()
    ok = count == want_n and first == want
    return CheckResult(ok, f"{count} paragraphs (need {want_n}); paragraph {nth} starts with {first!r} "
                           f"(need {want!r})", [(s, e)])


def _placeholders(r: str, kw: dict[str, Any]) -> CheckResult:
    spans = ls.bracket_spans(r)
    want = _int(kw.get("num_placeholders")) or 0
    return CheckResult(len(spans) >= want, f"{len(spans)} placeholders, need at least {want}", spans)


def _postscript(r: str, kw: dict[str, Any]) -> CheckResult:
    marker = str(kw.get("postscript_marker", ""))
    if marker == "P.P.S":
        pattern = r"\s*p\.\s?p\.\s?s.*$"
    elif marker == "P.S.":
        pattern = r"\s*p\.\s?s\..*$"
    else:
        pattern = r"\s*" + marker.lower() + r".*$"
    spans = ls.leading_space_search(pattern, r.lower(), re.MULTILINE, _search_all)
    return CheckResult(bool(spans), f"postscript {marker!r} {'found' if spans else 'missing'}", spans or _whole(r))


def _bullets(r: str, kw: dict[str, Any]) -> CheckResult:
    spans = ls.line_start_spans(r, ls.star_bullet_head)  # IFEval's ^\s*\*[^\*].*$ (MULTILINE)
    spans += ls.line_start_spans(r, ls.dash_bullet_head)  # and ^\s*-.*$
    want = _int(kw.get("num_bullets"))
    return CheckResult(len(spans) == want, f"{len(spans)} bullets, need exactly {want}", sorted(spans))


def _constrained(r: str, kw: dict[str, Any]) -> CheckResult:
    text = r.strip()
    for option in CONSTRAINED_RESPONSES:
        i = text.find(option)
        if i >= 0:
            off = len(r) - len(r.lstrip())
            return CheckResult(True, f"contains {option!r}", [(off + i, off + i + len(option))])
    return CheckResult(False, "none of the allowed answers appears", _whole(r))


def _highlights(r: str, kw: dict[str, Any]) -> CheckResult:
    spans = [m.span() for m in re.finditer(r"\*[^\n\*]*\*", r) if m.group().strip("*").strip()]
    spans += [m.span() for m in re.finditer(r"\*\*[^\n\*]*\*\*", r)
              if m.group().removeprefix("**").removesuffix("**").strip()]
    want = _int(kw.get("num_highlights")) or 0
    return CheckResult(len(spans) >= want, f"{len(spans)} highlights, need at least {want}", sorted(spans))


def _sections(r: str, kw: dict[str, Any]) -> CheckResult:
    splitter = str(kw.get("section_spliter", ""))
    try:
        rx = re.compile(r"\s?" + splitter + r"\s?\d+\s?")
    except re.error:
        rx = re.compile(r"\s?" + re.escape(splitter) + r"\s?\d+\s?")
    spans = [m.span() for m in rx.finditer(r)]
    count = len(rx.split(r)) - 1
    want = _int(kw.get("num_sections")) or 0
    return CheckResult(count >= want, f"{count} sections marked {splitter!r}, need at least {want}", spans)


def _json_format(r: str, kw: dict[str, Any]) -> CheckResult:
    text = r.strip()
    for prefix in ("```json", "```Json", "```JSON", "```"):
        text = text.removeprefix(prefix)
    text = text.removesuffix("```").strip()
    try:
        json.loads(text)
    except ValueError as exc:
        return CheckResult(False, f"not JSON ({exc})", _whole(r))
    return CheckResult(True, "valid JSON", _whole(r))


def _title(r: str, kw: dict[str, Any]) -> CheckResult:
    for start, end in ls.title_spans(r):  # IFEval's <<[^\n]+>>
        if r[start:end].lstrip("<").rstrip(">").strip():
            return CheckResult(True, f"title {r[start:end]!r}", [(start, end)])
    return CheckResult(False, "no <<title>>", _whole(r))


def _two_responses(r: str, kw: dict[str, Any]) -> CheckResult:
    parts = r.split("******")
    valid = []
    for i, part in enumerate(parts):
        if not part.strip():
            if 0 < i < len(parts) - 1:
                return CheckResult(False, "an empty response between separators", _whole(r))
        else:
            valid.append(part)
    ok = len(valid) == 2 and valid[0].strip() != valid[1].strip()
    return CheckResult(ok, f"{len(valid)} non-empty responses separated by ******" + ("" if ok or len(valid) != 2
                       else " (identical)"), _whole(r))


def _repeat_prompt(r: str, kw: dict[str, Any]) -> CheckResult:
    want = str(kw.get("prompt_to_repeat", "")).strip().lower()
    ok = r.strip().lower().startswith(want)
    off = len(r) - len(r.lstrip())
    return CheckResult(ok, "starts with the request" if ok else "does not start with the request",
                       [(off, min(len(r), off + len(want)))])


def _end_checker(r: str, kw: dict[str, Any]) -> CheckResult:
    want = str(kw.get("end_phrase", "")).strip().lower()
    text = r.strip().strip('"').lower()
    ok = text.endswith(want)
    end = len(r.rstrip())
    return CheckResult(ok, f"{'ends' if ok else 'does not end'} with {want!r}", [(max(0, end - len(want) - 1), end)])


_ASCII_CAPITAL = re.compile("[A-Z]")


def _capital_frequency(r: str, kw: dict[str, Any]) -> CheckResult:
    # Treebank tokens are pieces of the text (quotes become `` and ''): with no capital letter in an
    # ASCII text none is all-capital, and the tokenizer (slow on long text) need not run
    no_capital = r.isascii() and _ASCII_CAPITAL.search(r) is None
    count = 0 if no_capital else sum(1 for w in tu.treebank_words(r) if w.isupper())
    res = _compare(count, kw.get("capital_relation"), kw.get("capital_frequency"), "all-capital words")
    return CheckResult(res.ok, res.reason, _whole(r))


def _english_capital(r: str, kw: dict[str, Any]) -> CheckResult:
    if not r.isupper():
        return CheckResult(False, "not all capitals", _whole(r))
    ok, why = _lang_ok(r, "en")
    return CheckResult(ok, why, _whole(r))


def _english_lowercase(r: str, kw: dict[str, Any]) -> CheckResult:
    if not r.islower():
        return CheckResult(False, "not all lowercase", _whole(r))
    ok, why = _lang_ok(r, "en")
    return CheckResult(ok, why, _whole(r))


def _no_comma(r: str, kw: dict[str, Any]) -> CheckResult:
    spans = [(i, i + 1) for i, ch in enumerate(r) if ch == ","]
    return CheckResult(not spans, f"{len(spans)} commas", spans or _whole(r))


def _quotation(r: str, kw: dict[str, Any]) -> CheckResult:
    text = r.strip()
    ok = len(text) > 1 and text[0] == '"' and text[-1] == '"'
    return CheckResult(ok, "wrapped in double quotes" if ok else "not wrapped in double quotes", _whole(r))


# -- rendering (our own wording) ------------------------------------------------------------
def _q(words: Any) -> str:
    items = [str(w) for w in (words or [])]
    return ", ".join(f'"{w}"' for w in items)


def _lang_name(code: Any) -> str:
    return tu.LANGUAGE_NAMES.get(str(code), str(code))


_SPECS: list[tuple[str, tuple[str, ...], Checker, Callable[[dict[str, Any]], str]]] = [
    ("keywords:existence", ("keywords",), _existence,
     lambda k: f"Include the keywords {_q(k.get('keywords'))} in your response."),
    ("keywords:frequency", ("keyword", "frequency", "relation"), _frequency,
     lambda k: f"The word \"{k.get('keyword')}\" should appear {k.get('relation')} {k.get('frequency')} times."),
    ("keywords:forbidden_words", ("forbidden_words",), _forbidden,
     lambda k: f"Do not use any of these words: {_q(k.get('forbidden_words'))}."),
    ("keywords:letter_frequency", ("letter", "let_frequency", "let_relation"), _letter_frequency,
     lambda k: f"The letter \"{k.get('letter')}\" should appear {k.get('let_relation')} {k.get('let_frequency')} "
               "times in your response."),
    ("language:response_language", ("language",), _response_language,
     lambda k: f"Write your whole response in {_lang_name(k.get('language'))}, and no other language."),
    ("length_constraints:number_sentences", ("num_sentences", "relation"), _number_sentences,
     lambda k: f"Your response should have {k.get('relation')} {k.get('num_sentences')} sentences."),
    ("length_constraints:number_paragraphs", ("num_paragraphs",), _number_paragraphs,
     lambda k: f"Write exactly {k.get('num_paragraphs')} paragraphs, separated from each other by the "
               "markdown divider ***."),
    ("length_constraints:number_words", ("num_words", "relation"), _number_words,
     lambda k: f"Your response should contain {k.get('relation')} {k.get('num_words')} words."),
    ("length_constraints:nth_paragraph_first_word", ("num_paragraphs", "nth_paragraph", "first_word"),
     _nth_paragraph_first_word,
     lambda k: f"Write exactly {k.get('num_paragraphs')} paragraphs separated by blank lines; paragraph "
               f"{k.get('nth_paragraph')} must start with the word \"{k.get('first_word')}\"."),
    ("detectable_content:number_placeholders", ("num_placeholders",), _placeholders,
     lambda k: f"Include at least {k.get('num_placeholders')} placeholders in square brackets, like [name]."),
    ("detectable_content:postscript", ("postscript_marker",), _postscript,
     lambda k: f"End with a postscript that starts with {k.get('postscript_marker')}"),
    ("detectable_format:number_bullet_lists", ("num_bullets",), _bullets,
     lambda k: f"Use exactly {k.get('num_bullets')} markdown bullet points, each starting with \"* \"."),
    ("detectable_format:constrained_response", (), _constrained,
     lambda k: "Answer with one of: \"My answer is yes.\", \"My answer is no.\", \"My answer is maybe.\""),
    ("detectable_format:number_highlighted_sections", ("num_highlights",), _highlights,
     lambda k: f"Highlight at least {k.get('num_highlights')} sections with markdown, like *highlighted part*."),
    ("detectable_format:multiple_sections", ("section_spliter", "num_sections"), _sections,
     lambda k: f"Split your response into {k.get('num_sections')} sections, each starting with "
               f"\"{k.get('section_spliter')} X\" where X is its number."),
    ("detectable_format:json_format", (), _json_format,
     lambda k: "Format your entire output as JSON; markdown code fences are allowed."),
    ("detectable_format:title", (), _title,
     lambda k: "Give your response a title wrapped in double angular brackets, like <<my title>>."),
    ("combination:two_responses", (), _two_responses,
     lambda k: "Give two different responses, separated by six asterisks: ******."),
    ("combination:repeat_prompt", ("prompt_to_repeat",), _repeat_prompt,
     lambda k: f"First repeat this request word for word, then answer it: {k.get('prompt_to_repeat')}"),
    ("startend:end_checker", ("end_phrase",), _end_checker,
     lambda k: f"Finish your response with this exact phrase: \"{k.get('end_phrase')}\". Nothing may follow it."),
    ("change_case:capital_word_frequency", ("capital_frequency", "capital_relation"), _capital_frequency,
     lambda k: f"Words written in all capital letters should appear {k.get('capital_relation')} "
               f"{k.get('capital_frequency')} times."),
    ("change_case:english_capital", (), _english_capital,
     lambda k: "Write your entire response in English, in capital letters only."),
    ("change_case:english_lowercase", (), _english_lowercase,
     lambda k: "Write your entire response in English, in lowercase letters only; no capitals at all."),
    ("punctuation:no_comma", (), _no_comma,
     lambda k: "Do not use any commas in your response."),
    ("startend:quotation", (), _quotation,
     lambda k: "Wrap your entire response in double quotation marks."),
]

for _cid, _params, _checker, _render in _SPECS:
    register(ConstraintType(id=_cid, family="ifeval", params=_params, render=_render, checker=_checker,
                            description=f"IFEval {_cid}"))
