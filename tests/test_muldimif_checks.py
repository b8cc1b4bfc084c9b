"""MulDimIF checkers: hand-computed (response, kwargs, strict, loose) tables for every muldimif:* type."""

from __future__ import annotations

from collections import Counter

import pytest

from tasks.ifollow.constraints.base import check, get_constraint
from tasks.ifollow.constraints.muldimif import MULDIMIF_IDS


def case(cid, response, kwargs, strict, loose=None, note=""):
    return pytest.param(f"muldimif:{cid}", response, kwargs, strict, strict if loose is None else loose,
                        id=f"{cid}|{note}")


TABLE2 = "| A | B |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"
TABLE3 = "| A | B | C |\n|---|---|---|\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n| 7 | 8 | 9 |"
WORDS101 = " ".join(["word"] * 101)

CASES = [
    case("keywords:include", "I love Pasta dishes.", {"keywords": ["pasta"]}, True, note="case-insensitive"),
    case("keywords:include", "I love pastas", {"keywords": ["pasta"]}, False, note="whole word"),
    case("keywords:include", "Wendy's burger", {"keywords": ["Wendy's", "burger"]}, True, note="apostrophe, two"),
    case("keywords:include", "他是代表。", {"keywords": ["代表"]}, True, note="Chinese substring"),
    case("keywords:include", "cat and cat", {"keywords": ["cat"], "min_count": 2}, True, note="twice"),
    case("keywords:include", "cat", {"keywords": ["cat"], "min_count": 2}, False, note="once of two"),
    case("keywords:include", "- Disney film A\n- Film B", {"keywords": ["Disney"], "scope": "each"}, False, True,
         note="each item; loose drops the failing one"),
    case("keywords:include", "- Disney A\n- Disney B", {"keywords": ["Disney"], "scope": "each"}, True,
         note="each item ok"),
    case("keywords:include", "I like orange", {"keywords": ["apple", "orange"], "any_of": True}, True, note="or"),
    case("keywords:include", "I like banana", {"keywords": ["apple", "orange"], "any_of": True}, False,
         note="or, neither"),
    case("keywords:include", "C++x and more", {"keywords": ["C++"]}, False, note="word character after"),
    case("keywords:include", "I code C++ daily", {"keywords": ["C++"]}, True, note="symbol keyword"),
    case("keywords:include", "Heel pain is bad.", {"keywords": ["heel pain"], "end_period": True}, True,
         note="with period"),
    case("keywords:include", "Heel pain is bad", {"keywords": ["heel pain"], "end_period": True}, False,
         note="period missing"),
    case("keywords:include", "| Day | Workout Plan |\n|---|---|\n| 1 | upper body day |\n| 2 | legs |",
         {"keywords": ["upper body"], "scope": "each", "target": "plan"}, False, True,
         note="column matching the target; loose drops the failing row"),
    case("keywords:include", "| Day | Workout Plan |\n|---|---|\n| 1 | upper body day |\n| 2 | Upper Body |",
         {"keywords": ["upper body"], "scope": "each", "target": "plan"}, True, note="every cell of the column"),
    case("keywords:include", "1. Disney a\n2. Disney b", {"keywords": ["Disney"], "scope": "each", "target": "entry"},
         True, note="numbered items"),
    case("keywords:include", "Natwest is a dormant bank", {"keywords": ["Natwest"], "exclude": ["dormant"]}, False,
         note="avoided keyword present"),
    case("keywords:include", "Natwest is a bank", {"keywords": ["Natwest"], "exclude": ["dormant"]}, True,
         note="avoided keyword absent"),
    case("keywords:exclude", "legal content", {"keywords": ["pirated"]}, True, note="absent"),
    case("keywords:exclude", "Pirated stuff", {"keywords": ["pirated"]}, False, note="present, case"),
    case("keywords:exclude", "unpirated", {"keywords": ["pirated"]}, True, note="inside a word"),
    case("keywords:unstated", "anything", {"text": "include the names of key players"}, True, note="any"),
    case("keywords:unstated", "x", {"text": "t"}, True, note="short"),
    case("keywords:unstated", " \n", {"text": "t"}, False, note="blank response"),
    case("punctuation:ending", "Done.", {"marks": ["."]}, True, note="period"),
    case("punctuation:ending", "Done", {"marks": ["."]}, False, note="none"),
    case("punctuation:ending", "  Done.  \n", {"marks": ["."]}, True, note="surrounding whitespace"),
    case("punctuation:ending", "**Done.**", {"marks": ["."]}, False, True, note="markdown kept; loose drops *"),
    case("punctuation:ending", "Wow!", {"marks": ["!", "."]}, True, note="either mark"),
    case("punctuation:ending", "One. Two.", {"marks": ["."], "unit": "sentences"}, True, note="each sentence"),
    case("punctuation:ending", "One. Two?", {"marks": ["."], "unit": "sentences"}, False, note="question"),
    case("punctuation:ending", "A b.\nC d", {"marks": ["."], "unit": "lines"}, False, True,
         note="each line; loose drops the last"),
    case("punctuation:ending", "| H | I |\n|---|---|\n| a. | b. |", {"marks": ["."], "unit": "cells"}, True,
         note="cells below the header"),
    case("punctuation:ending", "| H | I |\n|---|---|\n| a. | b |", {"marks": ["."], "unit": "cells"}, False,
         True, note="cell 'b'; loose: no cell row left"),
    case("punctuation:ending", "- One! Two!\n- Three!", {"marks": ["!"], "unit": "bullets"}, True, note="bullets"),
    case("punctuation:ending", "- One! Two.\n- Three!", {"marks": ["!"], "unit": "bullets"}, False,
         True, note="bullet sentence; loose drops it"),
    case("punctuation:ending", "Hi!", {"marks": ["!"], "negate": True}, False, note="negated"),
    case("punctuation:ending", "Hi.", {"marks": ["!"], "negate": True}, True, note="negated ok"),
    case("identifiers:starts_with", "List of Models: A, B", {"prefix": "List of Models:"}, True, note="prefix"),
    case("identifiers:starts_with", "## List of Models: A", {"prefix": "List of Models:"}, True, note="after #"),
    case("identifiers:starts_with", "Models: A", {"prefix": "List of Models:"}, False, note="missing"),
    case("identifiers:starts_with", "## list of models: a", {"prefix": "List of Models:"}, True,
         note="case-insensitive after '#'"),
    case("identifiers:starts_with", "- Example: a\n- b", {"prefix": "Example:", "scope": "each"}, True,
         note="each: occurs somewhere (official)"),
    case("identifiers:starts_with", "- a\n- b", {"prefix": "Example:", "scope": "each"}, False, note="each: absent"),
    case("identifiers:name_initial", "Welcome to Prestige Motors", {"letter": "P"}, True, note="capital P word"),
    case("identifiers:name_initial", "welcome to motors", {"letter": "P"}, False, note="none"),
    case("identifiers:name_initial", "the pizza", {"letter": "P"}, False, note="lower-case p"),
    case("language:capitalized", "Hello World Today", {}, True, note="all capitalised"),
    case("language:capitalized", "Hello world", {}, False, note="one lower"),
    case("language:capitalized", "Hello World 2024 (Note) -", {}, True, note="digits, punctuation pass"),
    case("language:capitalized", "# Big Title\nbody text", {"scope": "headings"}, True, note="headings only"),
    case("language:capitalized", "no headings", {"scope": "headings"}, False, note="no heading: whole text"),
    case("language:capitalized", "| Name | Age |\n|---|---|\n| Ann | ten |", {"scope": "table"}, False, True,
         note="table cell 'ten'; loose drops that row"),
    case("language:uppercase", "HELLO WORLD", {}, True, note="upper"),
    case("language:uppercase", "HELLO World", {}, False, note="mixed"),
    case("language:uppercase", "123", {}, True, note="no letters: equals its upper case"),
    case("language:lowercase", "hello world", {}, True, note="lower"),
    case("language:lowercase", "Hello", {}, False, note="capital"),
    case("language:lowercase", "hello world 2024", {}, True, note="digits"),
    case("language:chinese", "这是一个测试。", {"variant": "simplified"}, True, note="has simplified characters"),
    case("language:chinese", "這是一個測試。", {"variant": "simplified"}, False, note="traditional only"),
    case("language:chinese", "This is English", {"variant": "simplified"}, False, note="no Chinese"),
    case("language:chinese", "這是一個測試", {"variant": "traditional"}, True, note="has traditional"),
    case("language:chinese", "這是繁體字", {"variant": "traditional", "mode": "entirely"}, True, note="entirely"),
    case("language:chinese", "这是简繁混合", {"variant": "traditional", "mode": "entirely"}, False, note="simplified in it"),
    case("language:chinese", "Mixed 繁體", {"variant": "traditional", "mode": "entirely"}, False, note="Latin letters"),
    case("length:words", "one two three", {"max": 3}, True, note="3"),
    case("length:words", "one two three four", {"max": 3}, False, note="4"),
    case("length:words", "optical illusion", {"max": 3, "keywords": ["illusion"]}, True, note="quoted word present"),
    case("length:words", "optical trick", {"max": 3, "keywords": ["illusion"]}, False, note="quoted word missing"),
    case("length:words", "你好世界", {"max": 3}, False, note="each ideograph a word"),
    case("length:words", "don't 3.5", {"min": 2, "max": 2}, True, note="whitespace tokens"),
    case("length:words", "- a b c\n- d e", {"max": 3, "scope": "each"}, True, note="each item"),
    case("length:words", "| Name | Age |\n|---|---|\n| Global Wave Cargo | 3 |\n| International Ocean Logistics Group | 4 |",
         {"max": 3, "scope": "each", "target": "name"}, False, True,
         note="cells under 'Name'; loose drops the long row"),
    case("length:words", "Title:\nA b c\nD e", {"max": 3, "scope": "each"}, True, note="lines ending ':' skipped"),
    case("length:words", "- a b c d\n- e", {"max": 3, "scope": "each"}, False, True, note="one item too long; loose drops it"),
    case("length:sentences", "One. Two.", {"min": 2}, True, note="2"),
    case("length:sentences", "One.", {"min": 2}, False, note="1"),
    case("length:sentences", "第一句。第二句。", {"min": 2}, True, note="CJK enders"),
    case("length:sentences", "# Title\nOne.", {"min": 2}, False, note="heading is no sentence"),
    case("length:characters", "- abcdefghijklmnop\n- abcdefghijklmnopq", {"min": 15, "scope": "each"}, True,
         note="each long"),
    case("length:characters", "- short\n- abcdefghijklmnopq", {"min": 15, "scope": "each"}, False, True, note="short; loose drops it"),
    case("length:characters", "  abc  ", {"max": 3}, True, note="whitespace stripped"),
    case("length:paragraphs", "a\n\nb", {"min": 2}, True, note="2"),
    case("length:paragraphs", "a\nb", {"min": 2}, False, note="one block"),
    case("length:paragraphs", "a\n\n\n\nb\n\n", {"min": 2, "max": 2}, True, note="extra blank lines"),
    case("format:blurb", "A short blurb.", {"max_chars": 200}, True, note="short"),
    case("format:blurb", "x" * 201, {"max_chars": 200}, False, note="201 characters"),
    case("format:blurb", "x" * 200, {"max_chars": 200}, True, note="200 characters"),
    case("markdown:heading_level", "## Title\ntext", {"level": 2}, True, note="h2"),
    case("markdown:heading_level", "### Title", {"level": 2}, False, note="h3"),
    case("markdown:heading_level", "```\n## in code\n```", {"level": 2}, True, note="code not excluded (official)"),
    case("markdown:heading_level", "##NoSpace", {"level": 2}, False, note="no space"),
    case("markdown:heading_level", "## A\n### B", {"level": 2, "each": True}, False, True,
         note="each heading must be h2; loose drops the h3"),
    case("markdown:heading_titled", "## Lunarians Overview\ntext", {"level": 2, "title": "Lunarians Overview"}, True,
         note="exact title"),
    case("markdown:heading_titled", "## Lunarians overview", {"level": 2, "title": "Lunarians Overview"}, False,
         note="case differs"),
    case("markdown:heading_titled", "# Lunarians Overview", {"level": 2, "title": "Lunarians Overview"}, False,
         note="level differs"),
    case("markdown:level_count", "# A\n## B", {"op": "at least", "n": 2}, True, note="two levels"),
    case("markdown:level_count", "## A\n## B", {"op": "at least", "n": 2}, False, note="one level"),
    case("markdown:level_count", "# A\n## B\n### C", {"op": "exactly", "n": 2}, False, True,
         note="three, not exactly two; loose drops one"),
    case("markdown:level_count", "plain", {"op": "at most", "n": 2}, True, note="zero levels <= 2"),
    case("markdown:level_count", "# A\n## B", {"op": "at least", "n": 2, "each": True}, False,
         note="each heading alone has one level (official)"),
    case("markdown:has_levels", "# A\n## B", {"levels": [1, 2]}, True, note="both"),
    case("markdown:has_levels", "# A\n### B", {"levels": [1, 2]}, False, note="h2 missing"),
    case("markdown:has_levels", "## B\n# A", {"levels": [1, 2]}, True, note="any order"),
    case("markdown:max_level", "# A\n## B", {"level": 2}, True, note="within"),
    case("markdown:max_level", "### C", {"level": 2}, False, note="too deep"),
    case("markdown:max_level", "no headings", {"level": 2}, False, note="needs a heading (official)"),
    case("markdown:headings", "# A", {}, True, note="one"),
    case("markdown:headings", "A", {}, False, note="none"),
    case("markdown:headings", "# A\ntext\n# B", {"min": 2}, True, note="two"),
    case("markdown:unchecked", "plain text", {"text": "use two heading levels"}, True, note="no rule read"),
    case("markdown:unchecked", "plain text", {"each": True, "text": "t"}, False, note="each: needs a heading"),
    case("markdown:unchecked", "# A", {"each": True, "text": "t"}, True, note="each with a heading"),
    case("markdown:block_quotes", "> quote", {}, True, note="quote"),
    case("markdown:block_quotes", "no quote", {}, False, note="none"),
    case("markdown:block_quotes", "text\n  > indented", {}, True, note="indented"),
    case("table:rows", TABLE2, {"max": 2, "required": True}, True, note="2 rows"),
    case("table:rows", TABLE3, {"max": 2, "required": True}, False, True, note="3 rows; loose drops one"),
    case("table:rows", "no table", {"max": 2, "required": True}, False, note="required"),
    case("table:rows", "no table", {"max": 2, "required": False}, True, note="optional"),
    case("table:rows", TABLE2 + "\n\nAnd:\n\n" + TABLE2, {"max": 6, "required": True}, False, True,
         note="first to last '|' is one block: 9 lines, 7 rows (official); loose drops a row"),
    case("table:rows", "| A |\n| 1 |\n| 2 |", {"max": 2, "required": True}, True, note="no separator: lines - 1"),
    case("table:columns", TABLE3, {"min": 3, "max": 3, "required": True}, True, note="3 columns"),
    case("table:columns", TABLE2, {"min": 3, "max": 3, "required": True}, False, note="2 columns"),
    case("table:columns", "Intro:\n" + TABLE2, {"max": 2, "required": True}, True, note="after text"),
    case("list:items", "- a\n- b\n- c", {"max": 3}, True, note="3"),
    case("list:items", "- a\n- b\n- c\n- d", {"max": 3}, False, True, note="4; loose drops one"),
    case("list:items", "no list", {"min": 1}, False, note="0 items"),
    case("json:nesting", '```json\n{"a": {"b": 1}}\n```', {"min": 2}, True, note="depth 2 fenced"),
    case("json:nesting", '{"a": 1}', {"min": 2}, False, note="depth 1"),
    case("json:nesting", "no json", {"min": 2}, False, note="none"),
    case("json:nesting", '{"a": {"b": {"c": 1}}}', {"max": 2}, False, note="depth 3"),
    case("json:nesting", 'text {"a": {"b": 1}} more', {"min": 2, "max": 2}, False,
         note="JSON inside prose is not read (official: block or whole text)"),
    case("json:nesting", '[{"a": 1}]', {"min": 2, "max": 2}, True, note="arrays count as a level"),
    case("json:nesting", '{"a": ', {"min": 1}, False, note="broken"),
    case("xml:attributes", '<a x="1" y="2"/>', {"max": 3}, True, note="2 <= 3"),
    case("xml:attributes", '<a w="0" x="1" y="2" z="3">', {"max": 3}, False, note="4"),
    case("xml:attributes", "no xml", {"max": 3}, True, note="no tag holds (official)"),
    case("xml:attributes", '<i a="1" b="2" c="3" d="4" e="5"><j/></i>', {"min": 5}, False,
         note="every tag needs 5: <j/> has 0"),
    case("xml:attributes", 'See:\n```xml\n<i a="1" b="2"/>\n```\n<k x="1" y="2" z="3"/>', {"max": 2}, True,
         note="only the xml block is read"),
    case("format:no_bullets", "Plain text.", {}, True, note="plain"),
    case("format:no_bullets", "- item", {}, False, note="dash"),
    case("format:no_bullets", "-5 degrees", {}, False, note="any line starting with '-' (official)"),
    case("format:no_bullets", "**Bold** start", {}, False, True, note="'*' at line start (official); loose drops *"),
    case("format:full_sentences", "This is one. This is two!", {}, True, note="sentences"),
    case("format:full_sentences", "- item", {}, True, note="holds for any response (official)"),
    case("format:full_sentences", "Fragment", {}, True, note="holds for any response (official)"),
]


@pytest.mark.parametrize("cid,response,kwargs,strict,loose", CASES)
def test_table(cid, response, kwargs, strict, loose):
    assert check(cid, response, kwargs).ok is strict
    assert check(cid, response, kwargs, loose=True).ok is loose


def test_every_type_has_three_cases():
    counts = Counter(p.values[0] for p in CASES)
    assert {i: counts[i] for i in MULDIMIF_IDS if counts[i] < 3} == {}
    assert len(MULDIMIF_IDS) == 30


def test_every_type_renders_and_is_family_muldimif():
    samples = {p.values[0]: p.values[2] for p in CASES}
    for cid in MULDIMIF_IDS:
        ctype = get_constraint(cid)
        assert ctype.family == "muldimif"
        assert isinstance(ctype.render(samples[cid]), str) and ctype.render(samples[cid])


@pytest.mark.parametrize("cid", MULDIMIF_IDS)
def test_empty_response_fails(cid):
    kwargs = {p.values[0]: p.values[2] for p in CASES}[cid]
    assert not check(cid, "", kwargs).ok
    assert not check(cid, "  \n ", kwargs, loose=True).ok
