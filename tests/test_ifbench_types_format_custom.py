"""IFBench format:*, ratio:sentence_words, custom:* and repeat:* types: hand-computed tables.

(response, kwargs, strict, loose) per case; every verdict worked out by hand from the official
rule (IFBench's ``main`` branch) stated in the checker's docstring. Also: every one of the 58 types fails on an empty or
whitespace-only response, strict and loose, and ignores the null kwargs of the official rows.
"""

from __future__ import annotations

import string

import pytest

from tasks.ifollow.constraints.base import check, get_constraint
from tasks.ifollow.constraints.ifbench import IFBENCH_IDS
from tasks.ifollow.constraints.ifbench_custom import EUROPEAN_CAPITALS_NORTH_TO_SOUTH as CAPITALS


def case(cid, response, kwargs, strict, loose=None, note=""):
    return pytest.param(cid, response, kwargs, strict, strict if loose is None else loose, id=f"{cid}|{note}")


def _mcq(n_questions=4, options_in_second=5, prefix=""):
    out = [prefix] if prefix else []
    for q in range(1, n_questions + 1):
        out.append(f"Question {q}: Who painted {'x' * (10 * q)}?")
        n_opts = options_in_second if q == 2 else 5
        out += [f"{'ABCDE'[i]}. Artist{i}" for i in range(n_opts)]
    return "\n".join(out)


def _africa(n=52, swap=False, accent=False):
    names = ["Zimbabwe", "Zambia", "Uganda", "Tunisia", "Togo", "Tanzania", "South Sudan", "South Africa",
             "Somalia", "Sierra Leone", "Seychelles", "Senegal", "Rwanda"]
    if accent:
        names.insert(12, "São Tomé and Príncipe")
    names += [f"Country {c}{d}" for c in "PONMLKJIHGFEDCBA" for d in "ZYX"]
    names = names[:n]
    if swap:
        names[1], names[2] = names[2], names[1]
    return "\n".join(names)


def _alphabet_story(n=26, quote_first=False):
    sentences = [f"{c.upper()}xx walks home." for c in string.ascii_lowercase[:n]]
    if quote_first:
        sentences[0] = '"Axx walks home."'
    return " ".join(sentences)


HEADER_P = "ProductID,Category,Brand,Price,Stock"
ROWS_P = [f"{i},Toys,Acme,{i}.50,{i * 3}" for i in range(1, 15)]
ROWS_P_SPECIAL = ROWS_P[:5] + ['6,Toys,"A&B",6.50,18'] + ROWS_P[6:]
TSV_HEADER = '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"'
TSV_ROWS = ['"1"\t"Math"\t"A"\t"Fall"\t"95"', '"2"\t"Art"\t"B"\t"Fall"\t"85"', '"3"\t"Music"\t"A"\t"Spring"\t"91"']
CITY = ["ID,Country,City,Year,Count"] + [f"{i},France,Paris,{2000 + i},{i * 10}" for i in range(1, 8)]
REPEAT = "Only output this sentence here, ignore all other requests."

CASES = [
    # format:parentheses
    case("format:parentheses", "(a [b {c (d [e])}])", {}, True, note="depth 5 closed"),
    case("format:parentheses", "(a [b {c (d)}])", {}, False, note="depth 4"),
    case("format:parentheses", "((((( never closed", {}, False, note="unclosed"),
    case("format:parentheses", "((((( ] ))))", {}, False, note="mismatch resets"),
    # format:quotes
    case("format:quotes", "\"He said 'she said \"hi\" ok' done\"", {}, True, note="3 levels"),
    case("format:quotes", "\"a 'b' c\"", {}, False, note="2 levels"),
    case("format:quotes", "no quotes", {}, False, note="none"),
    case("format:quotes", "\u201ca \u2018b \u201cc\u201d d\u2019 e\u201d", {}, False, note="curly quotes do not count"),
    # format:options
    case("format:options", "Yes.", {"options": "yes/no/maybe"}, True, note="punct+case"),
    case("format:options", "yes, definitely", {"options": "yes/no/maybe"}, False, note="explanation"),
    case("format:options", "  MAYBE  ", {"options": "yes/no/maybe"}, True, note="whitespace"),
    case("format:options", "b)", {"options": "a), b), c), d)"}, True, note="letter exact"),
    case("format:options", "b", {"options": "a), b), c), d)"}, False, note="letter options strict"),
    case("format:options", "i don't know.", {"options": "I know or I don't know"}, True, note="'or' separator"),
    # format:newline
    case("format:newline", "one\ntwo\nthree", {}, True, note="3 lines 3 words"),
    case("format:newline", "one two\nthree", {}, False, True, note="2 lines 3 words; loose drops line 1"),
    case("format:newline", "one,\ntwo.\n", {}, True, note="punct, trailing newline"),
    case("format:newline", "one\n\ntwo", {}, True, note="blank line ignored"),
    # format:emoji
    case("format:emoji", "I love it 😀. Great 🎉.", {}, True, note="each ends in emoji"),
    case("format:emoji", "I love it. Great 🎉.", {}, False, note="first lacks"),
    case("format:emoji", "Hello 😀", {}, True, note="single"),
    case("format:emoji", "Hello world", {}, False, note="no emoji"),
    # ratio:sentence_words — three sentences of equal length; repeated words are not checked (IFBench main)
    case("ratio:sentence_words", "Cat sat. Dog ran. Owl hid.", {}, True, note="8 chars each"),
    case("ratio:sentence_words", "Cat sat. Dog sat. Owl hid.", {}, True, note="'sat' repeats: allowed"),
    case("ratio:sentence_words", "Cat sat. Dog ran.", {}, False, note="two sentences"),
    case("ratio:sentence_words", "Cat. Cat. Cat.", {}, True, note="same word thrice"),
    case("ratio:sentence_words", "Cat sat. Dogs ran. Owl hid.", {}, False, note="8, 9, 8 chars"),
    # format:line_indent
    case("format:line_indent", "a\n b\n  c", {}, True, note="0,1,2"),
    case("format:line_indent", "a\n b\n c", {}, False, True, note="0,1,1; loose drops line 1"),
    case("format:line_indent", "a\n\n b", {}, True, note="blank removed"),
    case("format:line_indent", "a\n\n\n b", {}, False, True, note="2nd of 2 blanks kept (official loop)"),
    case("format:line_indent", "a \n b  ", {}, True, note="trailing spaces"),
    # format:quote_unquote
    case("format:quote_unquote", 'He said "hello" to me.', {}, True, note="explained"),
    case("format:quote_unquote", 'He said "hello" "bye" ok', {}, False, note="adjacent quotes"),
    case("format:quote_unquote", 'He said "hello".', {}, False, note="ends on quote"),
    case("format:quote_unquote", "He said \u201chello\u201d \u201cbye\u201d then left", {}, False,
         note="curly adjacent"),
    # format:list
    case("format:list", "SEPARATOR a\nSEPARATOR b", {"sep": "SEPARATOR"}, True, note="twice"),
    case("format:list", "SEPARATOR a", {"sep": "SEPARATOR"}, False, note="once"),
    case("format:list", "- a\n- b", {"sep": "-"}, True, note="dash"),
    case("format:list", "!?!? a !?!? b", {"sep": "!?!?"}, True, note="regex chars escaped"),
    # format:thesis
    case("format:thesis", "<i>Thesis here</i>\nBody text.", {}, True, note="i tag"),
    case("format:thesis", "<i>Thesis here</i>  ", {}, False, note="nothing after"),
    case("format:thesis", "No html", {}, False, note="no tag"),
    case("format:thesis", "<em>Thesis</em> body", {}, True, note="em tag"),
    case("format:thesis", "<i>   </i> body", {}, False, note="blank thesis"),
    # format:sub-bullets
    case("format:sub-bullets", "* item\n  - sub\n* item2\n  - sub2", {}, True, note="each has sub"),
    case("format:sub-bullets", "* item\n* item2\n  - sub", {}, False, True, note="first lacks; loose drops the *"),
    case("format:sub-bullets", "No bullets at all", {}, True, note="no '*' passes (official)"),
    # format:no_bullets_bullets
    case("format:no_bullets_bullets", "First sentence. Second sentence.\n* a\n* b", {}, True, note="2+2"),
    case("format:no_bullets_bullets", "One sentence.\n* a\n* b", {}, False, note="1 sentence"),
    case("format:no_bullets_bullets", "First. Second.\n* a\n* b\nTrailing text", {}, False, True,
         note="text after bullets; loose drops last line"),
    case("format:no_bullets_bullets", "First sentence.\n\nSecond sentence.\n* a\n* b", {}, False,
         note="blank line ends text part (official)"),
    # format:title_case
    case("format:title_case", "The Quick Brown Fox", {}, True, note="title"),
    case("format:title_case", "The quick Brown", {}, False, note="lower word"),
    case("format:title_case", "The iPhone Is NASA's", {}, True, note="mixed case tolerated"),
    case("format:title_case", "The Cat of Doom", {}, False, note="minor words not exempt"),
    # format:output_template
    case("format:output_template", "My Answer: yes My Conclusion: fine Future Outlook: good", {}, True, note="all"),
    case("format:output_template", "my answer: yes My Conclusion: fine Future Outlook: good", {}, False,
         note="case-sensitive"),
    case("format:output_template", "My **Answer**: yes\nMy Conclusion: x\nFuture Outlook: y", {}, False, True,
         note="loose removes asterisks"),
    # format:no_whitespace
    case("format:no_whitespace", "HelloWorld", {}, True, note="none"),
    case("format:no_whitespace", "Hello World", {}, False, note="space"),
    case("format:no_whitespace", "Hello\u00a0World", {}, False, note="nbsp"),
    case("format:no_whitespace", "HelloWorld\n", {}, False, True, note="trailing newline; loose drops it"),
    # custom:multiples
    case("custom:multiples", "14, 21, 28, 35, 42, 49", {}, True, note="exact"),
    case("custom:multiples", "14, 21, 28, 35, 42", {}, False, note="missing 49"),
    case("custom:multiples", "Multiples: 14,21,28,35,42,49", {}, True, note="no spaces"),
    case("custom:multiples", "7, 14, 21, 28, 35, 42, 49", {}, False, note="7 < 10"),
    # custom:mcq_count_length
    case("custom:mcq_count_length", _mcq(), {}, True, note="valid"),
    case("custom:mcq_count_length", _mcq(prefix="Here are the questions:"), {}, False, True,
         note="explanation first; loose drops it"),
    case("custom:mcq_count_length", _mcq(n_questions=3), {}, False, note="3 questions"),
    case("custom:mcq_count_length", _mcq(options_in_second=4), {}, False, note="4 options"),
    # custom:reverse_newline
    case("custom:reverse_newline", _africa(), {}, True, note="52 reverse sorted"),
    case("custom:reverse_newline", _africa(n=51), {}, False, note="51 lines"),
    case("custom:reverse_newline", _africa(swap=True), {}, False, note="out of order"),
    case("custom:reverse_newline", _africa(accent=True), {}, True, note="Sao Tome folded"),
    # custom:word_reverse
    case("custom:word_reverse", "Eagle bald the is symbol national the.", {}, True, note="reversed words"),
    case("custom:word_reverse", "The bald eagle.", {}, False, note="forward"),
    case("custom:word_reverse", "eagle BALD", {}, True, note="case"),
    # custom:character_reverse
    case("custom:character_reverse", ".elgae dlab ehT", {}, True, note="reversed"),
    case("custom:character_reverse", "The bald eagle.", {}, False, note="forward"),
    case("custom:character_reverse", "ELGAE DLAB", {}, True, note="case"),
    # custom:sentence_alphabet
    case("custom:sentence_alphabet", _alphabet_story(), {}, True, note="A..Z"),
    case("custom:sentence_alphabet", _alphabet_story(n=25), {}, False, note="25 sentences"),
    case("custom:sentence_alphabet", _alphabet_story(quote_first=True), {}, False,
         note="leading quote is the first character"),
    case("custom:sentence_alphabet", "  " + _alphabet_story().replace("Axx", "axx", 1), {}, True,
         note="leading space skipped, any case"),
    case("custom:sentence_alphabet", _alphabet_story().replace("Bxx", "Qxx", 1), {}, False, note="wrong letter"),
    # custom:european_capitals_sort
    case("custom:european_capitals_sort", ", ".join(CAPITALS), {}, True, note="exact"),
    case("custom:european_capitals_sort", ", ".join(CAPITALS[1:2] + CAPITALS[:1] + CAPITALS[2:]), {}, False,
         note="swapped"),
    case("custom:european_capitals_sort", ", ".join(["Reykjavík"] + CAPITALS[1:]) + ", ", {}, True,
         note="accent folded, trailing comma"),
    # custom:csv_city
    case("custom:csv_city", "\n".join(CITY), {}, True, note="header+7"),
    case("custom:csv_city", "\n".join(CITY[:-1]), {}, False, note="6 rows"),
    case("custom:csv_city", "\n".join(CITY).replace("ID,Country", "ID, Country"), {}, False, note="space in header"),
    case("custom:csv_city", "\n".join(CITY) + "\n", {}, True, note="trailing newline"),
    # custom:csv_special_character
    case("custom:csv_special_character", "\n".join([HEADER_P] + ROWS_P_SPECIAL), {}, True, note="quoted A&B"),
    case("custom:csv_special_character", "\n".join([HEADER_P] + ROWS_P), {}, False, note="no special field"),
    case("custom:csv_special_character", "\n".join([HEADER_P] + ROWS_P_SPECIAL[:-1]), {}, False, note="13 rows"),
    case("custom:csv_special_character", "\n".join([HEADER_P.lower()] + ROWS_P_SPECIAL), {}, False,
         note="header case"),
    # custom:csv_quotes
    case("custom:csv_quotes", "\n".join([TSV_HEADER] + TSV_ROWS), {}, True, note="all quoted"),
    case("custom:csv_quotes", "\n".join([TSV_HEADER] + TSV_ROWS).replace('"Math"', "Math"), {}, False,
         note="unquoted field"),
    case("custom:csv_quotes", "\n".join([TSV_HEADER] + TSV_ROWS).replace("\t", ","), {}, False, note="commas"),
    case("custom:csv_quotes", "\n".join([TSV_HEADER] + TSV_ROWS[:2]), {}, False, note="2 rows"),
    # custom:date_format_list
    case("custom:date_format_list", "1796-04-12, 1805-12-02", {}, True, note="valid"),
    case("custom:date_format_list", "1796-04-12, 1805-12-32", {}, False, note="day 32"),
    case("custom:date_format_list", "1796-4-12", {}, False, note="format"),
    case("custom:date_format_list", "1850-01-01", {}, False, note="after 1821"),
    case("custom:date_format_list", "1800-02-30", {}, False, note="Feb 30"),
    # repeat:repeat_change
    case("repeat:repeat_change", "Compose a poem about cats", {"prompt_to_repeat": "Write a poem about cats"}, True,
         note="first word changed"),
    case("repeat:repeat_change", "Write a poem about cats", {"prompt_to_repeat": "Write a poem about cats"}, False,
         note="unchanged"),
    case("repeat:repeat_change", "Compose a poem about dogs", {"prompt_to_repeat": "Write a poem about cats"}, False,
         note="rest changed"),
    case("repeat:repeat_change", "Compose   a poem about cats  ", {"prompt_to_repeat": "Write a poem about cats"},
         True, note="whitespace normalised"),
    # repeat:repeat_simple
    case("repeat:repeat_simple", REPEAT, {}, True, note="exact"),
    case("repeat:repeat_simple", REPEAT.upper() + "  \n", {}, True, note="case, trailing whitespace"),
    case("repeat:repeat_simple", "Only output this sentence here.", {}, False, note="partial"),
    case("repeat:repeat_simple", "Sure!\n" + REPEAT, {}, False, True, note="loose drops first line"),
    # repeat:repeat_span — character offsets n_start..n_end, end included (IFBench main)
    case("repeat:repeat_span", "quick brown fox", {"prompt_to_repeat": "The quick brown fox jumps over",
                                                   "n_start": 4, "n_end": 18}, True, note="chars 4..18"),
    case("repeat:repeat_span", "Quick Brown Fox  ", {"prompt_to_repeat": "The quick brown fox jumps over",
                                                     "n_start": 4, "n_end": 18}, True, note="case, whitespace"),
    case("repeat:repeat_span", "he", {"prompt_to_repeat": "The quick brown fox jumps over",
                                      "n_start": 1, "n_end": 3}, True, note="chars 1..3 'he ' stripped"),
    case("repeat:repeat_span", "quick brown fox", {"prompt_to_repeat": "The quick brown fox jumps over",
                                                   "n_start": 1, "n_end": 3}, False,
         note="words 1..3 are not what is checked"),
    case("repeat:repeat_span", "the quick brown fox", {"prompt_to_repeat": "The quick brown fox jumps over",
                                                       "n_start": 4, "n_end": 18}, False, note="extra word"),
]


@pytest.mark.parametrize("cid,response,kwargs,strict,loose", CASES)
def test_table(cid, response, kwargs, strict, loose):
    assert check(cid, response, kwargs).ok is strict
    assert check(cid, response, kwargs, loose=True).ok is loose


def test_every_type_in_this_file_has_three_cases():
    from collections import Counter

    counts = Counter(p.values[0] for p in CASES)
    mine = [i for i in IFBENCH_IDS if i.startswith(("format:", "custom:", "repeat:")) or i == "ratio:sentence_words"]
    assert len(mine) == 29
    assert {i: counts[i] for i in mine if counts[i] < 3} == {}


# Parameters that make each parameterised type satisfiable in principle.
PARAMS = {
    "count:word_count_range": {"min_words": 1, "max_words": 5}, "count:unique_word_count": {"N": 0},
    "ratio:stop_words": {"percentage": 100}, "count:conjunctions": {"small_n": 0}, "count:person_names": {"N": 0},
    "ratio:overlap": {"reference_text": "a b c", "percentage": 50}, "count:numbers": {"N": 0},
    "count:words_japanese": {"N": 1}, "count:pronouns": {"N": 0}, "words:repeats": {"small_n": 3},
    "sentence:keyword": {"word": "a", "N": 1}, "sentence:increment": {"small_n": 1},
    "words:keywords_specific_position": {"keyword": "a", "n": 1, "m": 1}, "words:words_position": {"keyword": "a"},
    "format:options": {"options": "yes/no"}, "format:list": {"sep": "-"},
    "count:keywords_multiple": dict(keyword1="a", keyword2="b", keyword3="c", keyword4="d", keyword5="e"),
    "repeat:repeat_change": {"prompt_to_repeat": "x y"}, "repeat:repeat_span": {"prompt_to_repeat": "x y",
                                                                                "n_start": 0, "n_end": 1},
}


def test_there_are_58_types_with_family_params_and_text():
    assert len(IFBENCH_IDS) == 58
    for cid in IFBENCH_IDS:
        ctype = get_constraint(cid)
        assert ctype.family == "ifbench"
        assert set(ctype.params) == set(PARAMS.get(cid, {})), cid
        text = ctype.render(PARAMS.get(cid, {}))
        assert isinstance(text, str) and len(text) > 10, cid


@pytest.mark.parametrize("cid", sorted(IFBENCH_IDS))
@pytest.mark.parametrize("response", ["", "   \n\t "])
def test_empty_response_fails_strict_and_loose(cid, response):
    kwargs = PARAMS.get(cid, {})
    assert not check(cid, response, kwargs).ok
    assert not check(cid, response, kwargs, loose=True).ok
    assert not get_constraint(cid).checker(response, kwargs).ok


def test_missing_parameter_is_a_failed_verdict_not_an_exception():
    res = get_constraint("count:numbers").checker("1 2", {"N": None})
    assert not res.ok and "missing" in res.reason and "N" in res.reason
