"""MulDimIF constraint parser: (category, subcategory, text) -> (constraint type id, kwargs).

MulDimIF's ``test.json`` rows carry ``constraints: [[category, subcategory, text], ...]`` in
natural language; its official evaluation maps each to a programmatic check with parameters read
from the text. This module does the same with our own rules, one parser per category group
(chosen by the ``"category_subcategory"`` key, as the official mapping does), each returning
exactly one check per triple so that rewards stay aligned with the row's constraints. A triple
that names another aspect too ("no more than 3 rows and 2 columns" under *Row limit*) is read
for its own category's aspect only.

:func:`constraints_for_row` parses a whole row; a triple no rule understands raises
:class:`MulDimIFParseError` naming the row and the text. :func:`coverage` reports how many
triples of a data set parse.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable
from typing import Any

import tasks.ifollow.constraints.muldimif_checks
import tasks.ifollow.constraints.muldimif_structure  # noqa: F401  (registers the structure types)
from tasks.ifollow.constraints.muldimif_phrases import (
    NUM,
    MulDimIFParseError,
    bound,
    mentions_each,
    quoted,
    to_int,
    unreadable,
)

Parsed = tuple[str, dict[str, Any]]

_EACH_TARGET = re.compile(r"\b(?:each|every)\s+(.+?)\s+(?:must|should|needs to|has to)\s+", re.IGNORECASE)


def parse_keywords(text: str) -> Parsed:
    """Keyword constraints, read as MulDimIF reads them.

    Keywords are the quoted strings; "avoid"/"must not include"... makes it an exclusion; "or" as
    a word makes any keyword enough; "at least N times"/"twice" sets the count; "must end with a
    period", "capitalized letters for each word", "at least/at most N words" in the same sentence
    add those conditions; "each/every <target> must ..." applies the rule to every element.
    """
    at = re.search(r"keywords?|terms?|关键词|關鍵詞|phrase", text, re.IGNORECASE)
    words = quoted(text[at.start():] if at else text) or quoted(text)
    if not words:
        # "include the names of key players", "avoid the mention of pirated content": no keyword
        # is stated, so nothing can be matched; the official checker's rule then holds no keyword.
        return "muldimif:keywords:unstated", {"text": text}
    both = (re.search(r"includes?\s+the\s+keyword\s+[\"']([^\"']+)[\"']", text, re.IGNORECASE),
            re.search(r"avoids?\s+the\s+keyword\s+[\"']([^\"']+)[\"']", text, re.IGNORECASE))
    if both[0] and both[1]:  # "includes the keyword 'X' and avoids the keyword 'Y'"
        return "muldimif:keywords:include", {"keywords": [both[0].group(1)], "exclude": [both[1].group(1)]}
    if re.search(r"\bavoid|must not (?:include|contain|use|mention)|should not (?:include|contain|use|mention)|"
                 r"\bexclude|\bwithout\b|do not (?:include|use|mention)|must be avoided", text, re.IGNORECASE):
        return "muldimif:keywords:exclude", {"keywords": words}
    t = text.lower()
    kw: dict[str, Any] = {"keywords": words}
    m = re.search(r"at least (\d+|one|two|three|four|five|six|seven|eight|nine|ten|once|twice)(?:\s+times?)?\b"
                  r"(?!\s+words?)", t)
    if m and to_int(m.group(1)) != 1:
        kw["min_count"] = to_int(m.group(1))
    if "must appear multiple times" in t:
        kw["min_count"] = 2
    if re.search(r"\bor\b", t):
        kw["any_of"] = True
    if re.search(r"must\s+end\s+with\s+(?:a\s+)?period", t):
        kw["end_period"] = True
    if "must use capitalized letters for each word" in t:
        kw["capitalized"] = True
    m = re.search(r"(?:at least|minimum of)\s+" + NUM + r"\s+words?\b", t)
    if m:
        kw["min_words"] = to_int(m.group(1))
    m = re.search(r"(?:not exceed|at most|no more than|maximum of)\s+" + NUM + r"\s+words?\b", t)
    if m:
        kw["max_words"] = to_int(m.group(1))
    if re.search(r"\b(?:each|every)\b", t) and "for each word" not in t:
        kw["scope"] = "each"
        target = _EACH_TARGET.search(text)
        if target:
            kw["target"] = target.group(1)
    return "muldimif:keywords:include", kw


_MARK_NAMES = {"period": ".", "question mark": "?", "exclamation mark": "!", "semicolon": ";"}


def parse_punctuation(text: str) -> Parsed:
    """MulDimIF's punctuation reading: the marks named, the unit, and negation.

    Unit (official rule, substring tests included): "paragraph"/"section" -> lines; else "each",
    "any" or "all" anywhere in the text (so also inside "finally") -> Punkt sentences; else the
    whole response; "table"/"cell" -> table cells; "bullet point" -> bullet sentences.
    """
    t = text.strip().lower().rstrip(".")
    names = [n.rstrip("s") for n in re.findall(
        r"\b(periods?|question marks?|exclamation marks?|semicolons?|punctuation marks?)\b", t)]
    if any("punctuation mark" in n for n in names):
        marks = list(string.punctuation)
    else:
        marks = list(dict.fromkeys(_MARK_NAMES[n] for n in names if n in _MARK_NAMES))
    if not marks:
        raise unreadable(text, "no ending mark named")
    if "bullet point" in t:
        first = next((m for name, m in _MARK_NAMES.items() if name in t), marks[0])
        return "muldimif:punctuation:ending", {"marks": [first], "unit": "bullets"}
    if "table" in t or "cell" in t:
        unit = "cells"
    elif "paragraph" in t or "section" in t:
        unit = "lines"
    elif "each" in t or "any" in t or "all" in t:
        unit = "sentences"
    else:
        unit = "response"
    kw: dict[str, Any] = {"marks": marks}
    if unit != "response":
        kw["unit"] = unit
    if re.search(r"\b(must not|avoid|exclude|not end with|do not use)\b", t):
        kw["negate"] = True
    return "muldimif:punctuation:ending", kw


def parse_identifiers(text: str) -> Parsed:
    words = quoted(text)
    if not words:
        raise unreadable(text, "no quoted identifier")
    if re.search(r"\bletter\b", text, re.IGNORECASE):
        return "muldimif:identifiers:name_initial", {"letter": words[-1]}
    kw: dict[str, Any] = {"prefix": words[-1]}
    if mentions_each(text):
        kw["scope"] = "each"
    return "muldimif:identifiers:starts_with", kw


_LEVEL = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_ANY_HEADINGS = ("include headings", "includes headings", "use heading levels", "using heading levels",
                 "presented under a separate heading", "separated with headings", "with headings")


def parse_markdown(text: str) -> Parsed:
    """Markdown heading constraints, read as MulDimIF reads them (first rule that applies).

    "each" or "any" anywhere in the text (also inside "company") makes every heading answer for
    the rule on its own. Block quotes; a heading titled '...'; two named levels ("heading levels
    1 and 2", "H1 ... H2"); one named level ("a level 2 heading", "heading level 3"); a count of
    distinct levels ("at least/at most/exactly two heading levels"); a deepest level ("must not
    exceed level 2"); plain "include headings" / "with headings". Text from which none of these
    reads a rule is ``muldimif:markdown:unchecked``.
    """
    t = text.strip().lower().rstrip(".")
    each = {"each": True} if ("each" in t or "any" in t) else {}
    if "block quote" in t or "blockquote" in t:
        n = re.search(NUM + r" block quotes", t) if "at least" in t else None
        return "muldimif:markdown:block_quotes", {"min": to_int(n.group(1))} if n else {}
    m = re.search(r"level " + _LEVEL + r" heading titled [\"'“](.*?)[\"'”]", text, re.IGNORECASE)
    if m:
        return "muldimif:markdown:heading_titled", {"level": to_int(m.group(1)), "title": m.group(2), **each}
    m = re.search(r"heading levels " + _LEVEL + r" and " + _LEVEL, t) or \
        re.search(r"heading levels.*?level\s*" + _LEVEL + r".*?level\s*" + _LEVEL, t)
    if m:
        return "muldimif:markdown:has_levels", {"levels": sorted({to_int(m.group(1)), to_int(m.group(2))}), **each}
    named = re.findall(r"a heading level " + _LEVEL, t) or re.findall(r"\bh(\d)\b", t) or \
        re.findall(r"level " + _LEVEL + r" for", t)
    if named and ("must include" in t or "should" in t):
        levels = sorted({to_int(x) for x in named})
        if len(levels) > 1:
            return "muldimif:markdown:has_levels", {"levels": levels, **each}
        return "muldimif:markdown:heading_level", {"level": levels[0], **each}
    m = re.search(r"(?:a|at least one|at least \d+|two|three|\d+) (?:heading level|level) " + _LEVEL
                  + r"(?: heading)?", t) or re.search(r"heading (?:at )?level " + _LEVEL, t)
    if m:
        return "muldimif:markdown:heading_level", {"level": to_int(m.group(1)), **each}
    m = re.search(r"(at least|at most|exactly|up to|a maximum of|under) " + _LEVEL + r" (?:different )?"
                  r"(?:heading )?levels?", t)
    if m:
        op = {"up to": "at most", "a maximum of": "at most", "under": "at most"}.get(m.group(1), m.group(1))
        return "muldimif:markdown:level_count", {"op": op, "n": to_int(m.group(2)), **each}
    m = re.search(r"must (?:not exceed|be limited to)\s+(?:level\s+)?" + _LEVEL, t)
    if m:
        return "muldimif:markdown:max_level", {"level": to_int(m.group(1)), **each}
    if any(p in t for p in _ANY_HEADINGS):
        return "muldimif:markdown:headings", each
    return "muldimif:markdown:unchecked", {**each, "text": text}


def _optional_table(t: str) -> bool:
    """A table limit binds only if a table is used: "if a table is used", "if you include any
    tables", "if any tabular data is presented"; a text that never says "table" binds nothing
    either (MulDimIF passes such a constraint when the response has no table)."""
    return "table" not in t or re.search(r"\bif\b[^.;]*?\b(?:tables?|tabular)\b", t) is not None


def parse_table(text: str, prefer: str = "") -> Parsed:
    t = text.lower()
    rows, cols = bound(t, r"rows?\b"), bound(t, r"columns?\b")
    if prefer == "columns" and cols or (cols and not rows):
        return "muldimif:table:columns", {**cols, "required": not _optional_table(t)}
    if rows:
        return "muldimif:table:rows", {**rows, "required": not _optional_table(t)}
    items = bound(t, r"[a-z][a-z-]*(?:\s+[a-z-]+)?")
    if items:
        return "muldimif:list:items", items
    raise unreadable(text, "no row, column or item count")


def parse_json(text: str) -> Parsed:
    t = text.lower()
    m = re.search(r"(at least|exceed(?:ing)?|at most|no more than|exactly|nesting level of|not exceed)\D*?" + NUM, t)
    if not m:
        raise unreadable(text, "no nesting bound")
    n = to_int(m.group(2))
    q = m.group(1)
    if q == "at least":
        return "muldimif:json:nesting", {"min": n}
    if q in ("exactly", "nesting level of"):
        return "muldimif:json:nesting", {"min": n, "max": n}
    return "muldimif:json:nesting", {"max": n}


def parse_xml(text: str) -> Parsed:
    t = text.lower()
    b = bound(t, r"attributes?")
    if b is None:
        m = re.search(r"exactly\s+" + NUM, t)
        if not m:
            raise unreadable(text, "no attribute count")
        b = {"min": to_int(m.group(1)), "max": to_int(m.group(1))}
    return "muldimif:xml:attributes", b


def parse_text_format(text: str) -> Parsed:
    t = text.lower()
    if "bullet" in t:
        return "muldimif:format:no_bullets", {}
    if "full sentence" in t:
        return "muldimif:format:full_sentences", {}
    raise unreadable(text, "unknown text format")


def parse_blurb(text: str) -> Parsed:
    return "muldimif:format:blurb", {"max_chars": 200}


def parse_chinese(text: str) -> Parsed:
    """MulDimIF's reading: "must use / convert into Traditional Chinese characters" -> entirely
    traditional; other mentions of Traditional (or 使用繁體中文) -> has traditional characters;
    "translate the text into Simplified Chinese" -> entirely simplified; otherwise -> has
    simplified characters."""
    t = text.lower()
    if re.search(r"must (?:use|convert into|be converted into) traditional chinese characters", t):
        return "muldimif:language:chinese", {"variant": "traditional", "mode": "entirely"}
    if re.search(r"(?:include|use) .*?traditional chinese characters|使用繁體中文", t):
        return "muldimif:language:chinese", {"variant": "traditional"}
    if "must translate the text into simplified chinese" in t:
        return "muldimif:language:chinese", {"variant": "simplified", "mode": "entirely"}
    return "muldimif:language:chinese", {"variant": "simplified"}


def parse_english(text: str) -> Parsed:
    t = text.lower()
    scope = {"scope": "table"} if "table" in t else {"scope": "headings"} if "heading" in t else {}
    if re.search(r"upper\s?case|all capital letters|all caps|in capitalized form", t):
        return "muldimif:language:uppercase", scope
    if re.search(r"lower\s?case", t):
        return "muldimif:language:lowercase", scope
    if "capital" in t:
        return "muldimif:language:capitalized", scope
    if "heading" in t or "markdown" in t:  # a Markdown request filed under English
        return parse_markdown(text)
    raise unreadable(text, "no English-case requirement")


_WORD_TARGET = re.compile(r"(?:each entry in the|each|the)\s+(.+?)\s+(?:is|in the table|column|must|consists of|"
                          r"contains?|should|have)", re.IGNORECASE)


def _length(unit_re: str, cid: str, scoped: bool) -> Callable[[str], Parsed]:
    def parse(text: str) -> Parsed:
        b = bound(text, unit_re)
        if b is None and scoped and bound(text, r"characters?\b"):
            b = bound(text, r"characters?\b")
            cid_here = "muldimif:length:characters"
        else:
            cid_here = cid
        if b is None:
            if "multiple" in text.lower():
                b = {"min": 2}
            elif bound(text, r"[a-z][a-z-]*(?:\s+[a-z-]+)?"):  # "at most 10 labeled components"
                return "muldimif:list:items", bound(text, r"[a-z][a-z-]*(?:\s+[a-z-]+)?")
            else:
                raise unreadable(text, f"no count for {cid.split(':')[-1]}")
        if cid_here == "muldimif:length:words" and not re.search(r"\beach\b", text, re.IGNORECASE):
            words = re.findall(r"[\"']([^']*)[\"']", text)  # MulDimIF: quoted words must appear too
            if words:
                b = {**b, "keywords": words}
        if scoped and re.search(r"\beach\b", text, re.IGNORECASE):
            b = {**b, "scope": "each"}
            m = _WORD_TARGET.search(text)
            if m and cid_here == "muldimif:length:words":
                b["target"] = m.group(1).lower().replace('"', "").replace("'", "")
        return cid_here, b

    return parse


_PARSERS: dict[str, Callable[[str], Parsed]] = {}
for _key in ("Content_Keywords", "Content_Keywords: Must include"):
    _PARSERS[_key] = parse_keywords
for _key in ("Content_Punctuation", "Content_Punctuation: Ending punctuation", "Punctuation_Ending punctuation"):
    _PARSERS[_key] = parse_punctuation
_PARSERS["Content_Identifiers"] = parse_identifiers
for _key in ("Format_Markdown", "Format_Markdown: Heading levels", "Markdown_Heading levels", "Markdown_Block quotes",
             "Format_Markdown: Block quotes"):
    _PARSERS[_key] = parse_markdown
for _key in ("Format_Table", "Format_Table: Row limit", "Table_Row limit", "Table_Table"):
    _PARSERS[_key] = parse_table
for _key in ("Format_Table: Column limit", "Table_Column limit"):
    _PARSERS[_key] = lambda text: parse_table(text, prefer="columns")
for _key in ("Format_Json", "Json_Object nesting levels"):
    _PARSERS[_key] = parse_json
for _key in ("Format_XML", "XML_Number of attributes"):
    _PARSERS[_key] = parse_xml
_PARSERS["Format_Text"] = parse_text_format
_PARSERS["Format_Blurb"] = parse_blurb
for _key in ("Language_Chinese", "Language_Chinese: Simplified", "Language_Chinese: Traditional"):
    _PARSERS[_key] = parse_chinese
for _key in ("Language_English", "Language_English: Capitalized", "Language_English: All Uppercase"):
    _PARSERS[_key] = parse_english
for _key in ("Length_Words", "Length_Words: At most", "Length_Words: At least", "Length_Words: Range"):
    _PARSERS[_key] = _length(r"words?\b", "muldimif:length:words", scoped=True)
for _key in ("Length_Sentences", "Length_Sentences: At least", "Length_Sentences: At most",
             "Length_Sentences: Range"):
    _PARSERS[_key] = _length(r"sentences?\b", "muldimif:length:sentences", scoped=False)
for _key in ("Length_Paragraphs", "Length_Paragraphs: At most", "Length_Paragraphs: At least",
             "Length_Paragraphs: Range"):
    _PARSERS[_key] = _length(r"paragraphs?\b", "muldimif:length:paragraphs", scoped=False)

KNOWN_CATEGORIES: tuple[str, ...] = tuple(sorted(_PARSERS))


def parse_constraint(category: str, subcategory: str, text: str) -> Parsed:
    """One MulDimIF triple -> (constraint type id, kwargs). Raises :class:`MulDimIFParseError`."""
    key = f"{category}_{subcategory}"
    parser = _PARSERS.get(key)
    if parser is None:
        raise MulDimIFParseError(f"unknown MulDimIF category {key!r}; known: {', '.join(KNOWN_CATEGORIES)}")
    return parser(text)


def constraints_for_row(row: dict[str, Any]) -> list[Parsed]:
    """Every constraint of a ``test.json`` row, in the row's order; errors name the row id."""
    out = []
    for i, triple in enumerate(row.get("constraints") or []):
        try:
            category, subcategory, text = triple
            out.append(parse_constraint(category, subcategory, text))
        except (MulDimIFParseError, ValueError, KeyError) as exc:
            raise MulDimIFParseError(f"MulDimIF row {row.get('id')!r}, constraint {i}: {exc}") from exc
    return out


def coverage(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How many triples parse: ``{"total", "parsed", "by_type", "failures": [(row id, index, text, error)]}``."""
    total, by_type, failures = 0, Counter(), []
    for row in rows:
        for i, triple in enumerate(row.get("constraints") or []):
            total += 1
            try:
                cid, _ = parse_constraint(*triple)
                by_type[cid] += 1
            except (MulDimIFParseError, ValueError, KeyError, TypeError) as exc:
                failures.append((row.get("id"), i, triple[-1] if triple else None, str(exc)))
    return {"total": total, "parsed": total - len(failures), "by_type": dict(by_type), "failures": failures}
