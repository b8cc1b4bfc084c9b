"""MulDimIF parser: hand-read (category, subcategory, text) -> (id, kwargs) table, errors, and
coverage of the real test set (every one of its 4,180 constraints parses)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tasks.ifollow.constraints.muldimif import (
    MulDimIFParseError,
    check_row,
    constraints_for_row,
    coverage,
    parse_constraint,
)

PARSE = [
    ("Length", "Words", "The response must contain no more than 150 words", ("length:words", {"max": 150})),
    ("Length", "Words", "Range: 50-100 words", ("length:words", {"min": 50, "max": 100})),
    ("Length", "Words: Range", "The answer must be between 10 and 20 words.", ("length:words", {"min": 10, "max": 20})),
    ("Length", "Words", "at least 150 words", ("length:words", {"min": 150})),
    ("Length", "Words", "the term must be at most 3 words long, and it must include the keyword 'illusion'",
     ("length:words", {"max": 3, "keywords": ["illusion"]})),
    ("Length", "Words", "Each name must be at most 3 words long", ("length:words", {"max": 3, "scope": "each", "target": "name"})),
    ("Length", "Words", "ensure that the sentence contains fewer than 15 words", ("length:words", {"max": 14})),
    ("Length", "Sentences", "The answer must be at most 1 sentence long", ("length:sentences", {"max": 1})),
    ("Length", "Sentences: At most", "Each explanation must be a single sentence",
     ("length:sentences", {"min": 1, "max": 1})),  # the official sentence count has no "each"
    ("Length", "Sentences", "the thesis slide must contain between 3 to 5 sentences to ensure clarity",
     ("length:sentences", {"min": 3, "max": 5})),
    ("Length", "Paragraphs", "Please provide your answer in exactly 2 paragraphs", ("length:paragraphs", {"min": 2, "max": 2})),
    ("Length", "Paragraphs", "The response must be a single paragraph", ("length:paragraphs", {"min": 1, "max": 1})),
    ("Length", "Paragraphs", "the exam should be concise, not exceeding a total of 15 paragraphs",
     ("length:paragraphs", {"max": 15})),
    ("Content", "Keywords", "The script must include the keywords 'Wake Forest', 'Trevor Lawrence', and 'injury'",
     ("keywords:include", {"keywords": ["Wake Forest", "Trevor Lawrence", "injury"]})),
    ("Content", "Keywords", "Must include the keyword \"Wendy's\".", ("keywords:include", {"keywords": ["Wendy's"]})),
    ("Content", "Keywords: Must include", "該句必須包含關鍵詞「代表」", ("keywords:include", {"keywords": ["代表"]})),
    ("Content", "Keywords", "the keyword 'Disney' must be included in each entry",
     ("keywords:include", {"keywords": ["Disney"], "scope": "each"})),
    ("Content", "Keywords", "The answer must avoid the keyword 'cheap'", ("keywords:exclude", {"keywords": ["cheap"]})),
    ("Content", "Keywords", "Each question must include the keywords 'game mechanics' and 'user experience'",
     ("keywords:include", {"keywords": ["game mechanics", "user experience"], "scope": "each", "target": "question"})),
    ("Content", "Keywords", "Ensure the statement includes the keyword 'Natwest' and avoids the keyword 'dormant'.",
     ("keywords:include", {"keywords": ["Natwest"], "exclude": ["dormant"]})),
    ("Content", "Keywords", "Must include 'apple' or 'orange'", ("keywords:include", {"keywords": ["apple", "orange"],
                                                                                     "any_of": True})),
    ("Content", "Keywords", "The answer must include the keyword 'Cleopatra' at least twice.",
     ("keywords:include", {"keywords": ["Cleopatra"], "min_count": 2})),
    ("Content", "Keywords", "ensure that the response avoids the mention of illegal or pirated content",
     ("keywords:unstated", {"text": "ensure that the response avoids the mention of illegal or pirated content"})),
    ("Content", "Punctuation", "Ending punctuation must be a period", ("punctuation:ending", {"marks": ["."]})),
    ("Content", "Punctuation: Ending punctuation", "The script must end with an exclamation mark.",
     ("punctuation:ending", {"marks": ["!"]})),
    ("Content", "Punctuation", "make sure that each sentence ends with a period",
     ("punctuation:ending", {"marks": ["."], "unit": "sentences"})),
    ("Content", "Punctuation", "Each entry in the table must end with a period for uniformity",
     ("punctuation:ending", {"marks": ["."], "unit": "cells"})),
    ("Content", "Punctuation: Ending punctuation", "Finally, ensure the answer ends with an exclamation mark!",
     ("punctuation:ending", {"marks": ["!"], "unit": "sentences"})),  # 'all' inside 'Finally' (official rule)
    ("Content", "Punctuation", "Ensure that each paragraph concludes with a period",
     ("punctuation:ending", {"marks": ["."], "unit": "lines"})),
    ("Content", "Punctuation", "Avoid using exclamation marks", ("punctuation:ending", {"marks": ["!"], "negate": True})),
    ("Content", "Identifiers", "The answer must start with the identifier 'List of Models:'",
     ("identifiers:starts_with", {"prefix": "List of Models:"})),
    ("Content", "Identifiers", "The name of the showroom must start with the letter 'P'.",
     ("identifiers:name_initial", {"letter": "P"})),
    ("Format", "Markdown", "The answer must include a level 2 heading with the book's title.",
     ("markdown:heading_level", {"level": 2})),
    ("Format", "Markdown", "The answer must use at least two different heading levels in Markdown format",
     ("markdown:level_count", {"op": "at least", "n": 2})),
    ("Markdown", "Heading levels", "The answer must use heading levels 1 and 2 to organize the content",
     ("markdown:has_levels", {"levels": [1, 2]})),
    ("Markdown", "Heading levels", "Any headings used in the answer must not exceed level 2",
     ("markdown:max_level", {"level": 2, "each": True})),  # 'any' in the text: per heading (official)
    ("Format", "Markdown", "The answer must include a level 2 heading titled \"Lunarians Overview\"",
     ("markdown:heading_titled", {"level": 2, "title": "Lunarians Overview"})),
    ("Format", "Markdown", "The answer must use a level 2 heading for each console mentioned",
     ("markdown:heading_level", {"level": 2, "each": True})),
    ("Format", "Markdown", "ensure that the response is structured using exactly two heading levels",
     ("markdown:level_count", {"op": "exactly", "n": 2})),
    ("Format", "Markdown", "organize the response into sections such as 'Resolution' and 'Texture Quality'",
     ("markdown:unchecked", {"text": "organize the response into sections such as 'Resolution' and 'Texture Quality'"})),
    ("Markdown", "Block quotes", "Use block quotes to highlight key points about the currents.",
     ("markdown:block_quotes", {})),
    ("Format", "Table", "If a table is used, it must not exceed three rows.",
     ("table:rows", {"max": 3, "required": False})),
    ("Format", "Table", "Include a table with a row limit of 5 to summarize", ("table:rows", {"max": 5, "required": True})),
    ("Table", "Column limit", "The table must have exactly 3 columns labeled 'Chainring', 'Rear Cog', and 'Gear Ratio'",
     ("table:columns", {"min": 3, "max": 3, "required": True})),
    ("Table", "Row limit", "The table must have no more than 3 rows and 2 columns.",
     ("table:rows", {"max": 3, "required": True})),
    ("Table", "Row limit", "The list must contain no more than 5 boss fights", ("list:items", {"max": 5})),
    ("Json", "Object nesting levels", "the answer must include a JSON example with exactly two levels of nesting",
     ("json:nesting", {"min": 2, "max": 2})),
    ("Format", "Json", "Object nesting levels must not exceed 3", ("json:nesting", {"max": 3})),
    ("XML", "Number of attributes", "Each XML element must have no more than three attributes",
     ("xml:attributes", {"max": 3})),
    ("Format", "XML", "Number of attributes must be exactly 5", ("xml:attributes", {"min": 5, "max": 5})),
    ("Format", "Text", "No bullet points", ("format:no_bullets", {})),
    ("Format", "Blurb", "the response should be concise, resembling a short blurb", ("format:blurb", {"max_chars": 200})),
    ("Language", "Chinese", "The answer must be provided in Simplified Chinese.", ("language:chinese", {"variant": "simplified"})),
    ("Language", "Chinese: Traditional", "確保使用繁體中文書寫", ("language:chinese", {"variant": "traditional"})),
    ("Language", "Chinese", "Must use Traditional Chinese characters",
     ("language:chinese", {"variant": "traditional", "mode": "entirely"})),
    ("Language", "English", "The answer must be written in all uppercase letters", ("language:uppercase", {})),
    ("Language", "English", "The answer must be in lowercase", ("language:lowercase", {})),
    ("Language", "English: Capitalized", "each word must be capitalized", ("language:capitalized", {})),
    ("Language", "English", "Ensure each word in the headings is capitalized", ("language:capitalized", {"scope": "headings"})),
]


@pytest.mark.parametrize("category,subcategory,text,expected", PARSE, ids=[p[2][:40] for p in PARSE])
def test_parse_table(category, subcategory, text, expected):
    cid, kwargs = parse_constraint(category, subcategory, text)
    assert (cid, kwargs) == ("muldimif:" + expected[0], expected[1])


def test_unknown_category_lists_known_ones():
    with pytest.raises(MulDimIFParseError, match="unknown MulDimIF category 'Style_Tone'.*Content_Keywords"):
        parse_constraint("Style", "Tone", "be polite")


def test_unparsable_constraint_names_the_row():
    row = {"id": "row-7", "constraints": [["Length", "Words", "at most 5 words"], ["Format", "Text", "be nice"]]}
    with pytest.raises(MulDimIFParseError, match="row 'row-7', constraint 1.*unknown text format"):
        constraints_for_row(row)


def test_check_row_accuracy_unit():
    row = {"id": "x", "constraints": [["Length", "Words", "at most 5 words"],
                                      ["Content", "Punctuation", "end with a period"]]}
    assert check_row(row, "Short and sweet.")[0] is True
    ok, results = check_row(row, "Short and sweet")
    assert ok is False and [r.ok for r in results] == [True, False]
    ok, results = check_row(row, "This answer is far too long.")
    assert ok is False and [r.ok for r in results] == [False, True]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    if "MRBENCH_DATA_DIR" not in os.environ:
        pytest.skip("MRBENCH_DATA_DIR is not set: MulDimIF test.json is not available")
    return json.loads((Path(os.environ["MRBENCH_DATA_DIR"]) / "muldimif" / "test.json").read_text(encoding="utf-8"))


def test_every_test_set_constraint_parses(rows):
    t0 = time.perf_counter()
    cov = coverage(rows)
    print(f"\nMulDimIF coverage: {cov['parsed']}/{cov['total']} constraints of {len(rows)} rows parse "
          f"in {time.perf_counter() - t0:.2f} s; by type: {sorted(cov['by_type'].items())}")
    assert (len(rows), cov["total"], cov["parsed"], cov["failures"]) == (1200, 4180, 4180, [])
    assert cov["by_type"]["muldimif:keywords:unstated"] == 2  # the two keyword constraints that name none
    assert cov["by_type"]["muldimif:markdown:unchecked"] == 46  # Markdown texts MulDimIF reads no rule from
    for row in rows:
        assert len(constraints_for_row(row)) == len(row["constraints"])


def test_rows_score_without_error_and_the_prompt_is_a_poor_answer(rows):
    """Every row's checks run on a real text (its own prompt); few rows are satisfied by it."""
    correct = sum(check_row(row, row["conversations"][0]["content"])[0] for row in rows)
    assert 0 < correct < len(rows) // 4
