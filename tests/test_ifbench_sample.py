"""IFBench checkers on the 294 real sample responses: per-constraint file, and a hand spot-check.

``bench/ifbench_sample_verdicts.py`` writes one JSONL line per (response, constraint). The table
below holds verdicts read by hand from the responses against IFBench's official definitions (the
reason for each is in its comment); the file must agree with every one of them.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (key, constraint index, instruction id, strict, loose): hand-read verdicts.
HAND = [
    ("0", 0, "count:keywords_multiple", False, False),  # 'labyrinth' 10 times in paragraph 1 alone, not 5
    ("11", 0, "words:keywords_specific_position", False, False),  # one sentence, sentence 23 wanted
    ("15", 0, "words:words_position", False, False),  # "whisper understanding whisper": 2nd word differs
    ("16", 0, "words:words_position", False, False),  # 2nd word 'in', 2nd-to-last 'of'
    ("20", 0, "count:numbers", False, False),  # 3,1,50,2,30,3,20: seven numbers, not 3
    ("47", 0, "count:words_japanese", False, False),  # word 10 'align' is English
    ("60", 0, "repeat:repeat_change", False, False),  # request repeated verbatim, first word unchanged
    ("61", 0, "repeat:repeat_change", False, False),  # dropped "Use Python code:", rest differs
    ("63", 0, "repeat:repeat_simple", False, False),  # some other sentence
    ("64", 0, "repeat:repeat_simple", False, False),  # a code block
    ("80", 0, "format:line_indent", False, True),  # three lines all unindented; loose: one line left
    ("80", 1, "ratio:sentence_words", False, False),  # lengths 46, 46, 49
    ("81", 0, "format:line_indent", True, True),  # a single line: no stair to break
    ("81", 1, "ratio:sentence_words", False, False),  # sentence lengths differ widely
    ("82", 0, "format:list", True, True),  # 'SEPARATOR' twice
    ("88", 0, "format:list", False, False),  # '!??' is not '!?!?'
    ("88", 1, "words:no_consecutive", True, True),  # n,0,1,...,9: no two neighbours share a first char
    ("91", 0, "format:newline", True, True),  # four words, four lines
    ("94", 0, "format:newline", True, True),  # one word
    ("100", 0, "format:options", True, True),  # 'yes'
    ("101", 0, "format:options", True, True),  # 'I know'
    ("102", 0, "format:options", False, False),  # 'd).' is not exactly 'd)' (letter options are strict)
    ("103", 0, "format:options", True, True),  # 'yes'
    ("104", 0, "format:options", False, False),  # 'd' is not 'd)'
    ("105", 0, "format:options", True, True),  # "I don't know"
    ("105", 1, "format:newline", False, False),  # three words on one line
    ("138", 0, "format:thesis", False, False),  # markdown _italics_, no HTML <i>/<em>
    ("139", 0, "format:thesis", False, False),  # same
    ("140", 0, "format:thesis", False, False),  # same
    ("141", 0, "format:thesis", False, False),  # same
    ("166", 0, "ratio:sentence_words", False, False),  # 'and' in two sentences; lengths differ
    ("167", 0, "ratio:sentence_words", False, False),  # 'and' repeated; lengths differ
    ("168", 0, "ratio:sentence_words", False, False),  # lengths 77, 87, 77; "and" in two sentences
    ("169", 0, "ratio:sentence_words", False, False),  # lengths differ
    ("187", 0, "sentence:increment", True, True),  # 13 words then 14 words
    ("208", 0, "words:consonants", False, False),  # 'I' has no consonant pair
    ("217", 0, "words:consonants", False, False),  # 'to' has no consonant pair
    ("219", 0, "words:last_first", True, True),  # no sentence end at all: one sentence
    ("224", 0, "words:no_consecutive", True, True),  # a,c,i,o,b,i,w,l,e
    ("225", 0, "words:no_consecutive", False, False),  # 'conversation can'
    ("247", 0, "words:prime_lengths", False, False),  # 'a' has length 1
    ("248", 0, "words:prime_lengths", False, False),  # 'I'
    ("250", 0, "words:prime_lengths", True, True),  # 'Nerve': 5
    ("251", 0, "words:prime_lengths", False, False),  # 'B' after ')' is deleted: length 1
    ("256", 0, "words:repeats", True, True),  # most repeated word 'a', 3 times, allowed 3
    ("257", 0, "words:start_verb", True, True),  # 'Conceive an empire ...' (imperative)
    ("259", 0, "words:start_verb", True, True),  # 'Prove that ...'
    ("260", 0, "words:start_verb", True, True),  # 'Whirring and pulsing ...' (participle: VBG)
    ("261", 0, "words:start_verb", True, True),  # 'Build ...'
    ("262", 0, "words:start_verb", True, True),  # 'Identify the political ideologies ...'
    ("275", 0, "custom:csv_quotes", False, False),  # comma-delimited, tabs required
    ("277", 0, "custom:date_format_list", True, True),  # 18 valid YYYY-MM-DD dates 1800-1815
    ("278", 0, "custom:european_capitals_sort", False, False),  # Stockholm before Tallinn, Belgrade listed
    ("283", 0, "custom:word_reverse", False, False),  # reversed reads 'is us of the...': no bald eagle
    ("286", 0, "repeat:repeat_span", False, False),  # whole passage, not words 0..7
    ("287", 0, "repeat:repeat_span", False, False),  # 'vertex', not the 3-word span
    ("292", 0, "format:output_template", True, True),  # all three labels
    ("293", 0, "format:output_template", True, True),
    ("294", 0, "format:output_template", True, True),
    ("295", 0, "format:output_template", True, True),
    ("296", 0, "format:no_whitespace", True, True),  # 'no'
    ("297", 0, "format:no_whitespace", True, True),  # 'low'
    ("298", 0, "format:no_whitespace", True, True),  # 'piousegoists'
    ("299", 0, "format:no_whitespace", False, False),  # newline-separated names
    ("27", 0, "count:person_names", True, True),  # opens "Emma, Liam, and Sophia": 3 wanted
]


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if "MRBENCH_DATA_DIR" not in os.environ:
        pytest.skip("MRBENCH_DATA_DIR is not set: the IFBench sample responses are not available")
    return Path(os.environ["MRBENCH_DATA_DIR"])


@pytest.fixture(scope="module")
def verdict_file(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("ifbench_sample_verdicts", ROOT / "bench" / "ifbench_sample_verdicts.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("ifbench") / "verdicts.jsonl"
    assert module.main(["x", str(data_dir), str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def lines(verdict_file: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(line) for line in verdict_file.read_text(encoding="utf-8").splitlines()]
    return {(r["key"], r["index"]): r for r in rows}


def test_file_covers_every_joined_constraint(lines):
    # 294 sample responses, one of whose prompts is not in the 300-row test file: 293 joined,
    # carrying 334 constraints between them.
    assert len(lines) == 334
    assert len({k for k, _ in lines}) == 293
    for row in lines.values():
        assert set(row) == {"key", "index", "instruction_id", "kwargs", "strict", "loose", "reason", "spans"}
        assert row["loose"] or not row["strict"]  # loose never stricter than strict
        assert None not in row["kwargs"].values()


def test_hand_spot_check(lines):
    assert len(HAND) >= 40
    wrong = []
    for key, index, cid, strict, loose in HAND:
        row = lines[(key, index)]
        assert row["instruction_id"] == cid
        if (row["strict"], row["loose"]) != (strict, loose):
            wrong.append((key, index, cid, row["strict"], row["loose"], strict, loose))
    assert wrong == []


def test_null_kwargs_as_in_the_official_rows_change_nothing(data_dir):
    """Checking with the raw rows (every kwarg name present, mostly null) equals checking with nulls dropped."""
    import tasks.ifollow.constraints.ifbench  # noqa: F401
    from tasks.ifollow.constraints.base import get_constraint

    tests = [json.loads(x) for x in (data_dir / "ifbench" / "IFBench_test.jsonl").read_text().splitlines()]
    for row in tests[::10]:
        for cid, kwargs in zip(row["instruction_id_list"], row["kwargs"]):
            checker = get_constraint(cid).checker
            clean = {k: v for k, v in kwargs.items() if v is not None}
            for response in (row["prompt"], "A short reply. With two sentences!"):
                assert checker(response, kwargs).ok == checker(response, clean).ok


def test_rendered_instructions_appear_in_the_benchmark_prompts(data_dir):
    """Each type renders the instruction sentence IFBench's prompts print, with the row's kwargs.

    335 of the 344 (row, constraint) pairs render to a substring of the prompt; the other 9 are
    the data's own wording variants (e.g. "In your response the last word..." without a comma,
    "3-rd sentence" where 18 other rows say "-th").
    """
    import tasks.ifollow.constraints.ifbench  # noqa: F401
    from tasks.ifollow.constraints.base import get_constraint

    rows = [json.loads(x) for x in (data_dir / "ifbench" / "IFBench_test.jsonl").read_text().splitlines()]
    pairs = [(get_constraint(c).render(k), r["prompt"]) for r in rows for c, k in zip(r["instruction_id_list"], r["kwargs"])]
    assert len(pairs) == 344
    assert sum(text in prompt for text, prompt in pairs) >= 335
