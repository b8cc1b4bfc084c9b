"""Hand-computed (response, kwargs, strict, loose) tables for every IFEval instruction id.

Each id has at least three rows including an edge case (empty or whitespace-only response,
unicode, trailing whitespace, case variants, markdown that only the loose variants remove).
"""

from __future__ import annotations

import pytest

from tasks.ifollow.constraints import check, family_ids

LOWER = "this is a short answer written in plain english about the weather today"
T = True
F = False

TABLE: dict[str, list[tuple[str, dict, bool, bool]]] = {
    "keywords:existence": [
        ("I like the River and trees.", {"keywords": ["river", "tree"]}, T, T),  # substring, any case
        ("Nothing relevant here.", {"keywords": ["river"]}, F, F),
        ("", {"keywords": ["river"]}, F, F),
        ("Café au lait.", {"keywords": ["café"]}, T, T),
    ],
    "keywords:frequency": [
        ("the cat, the dog, there", {"keyword": "the", "frequency": 3, "relation": "at least"}, T, T),  # "there"
        ("the cat, the dog", {"keyword": "the", "frequency": 2, "relation": "less than"}, F, F),
        ("THE end", {"keyword": "the", "frequency": 2, "relation": "less than"}, T, T),
        ("the the", {"keyword": "the", "frequency": 2, "relation": "about"}, F, F),  # unknown relation
    ],
    "keywords:forbidden_words": [
        ("There is nothing here.", {"forbidden_words": ["the"]}, T, T),  # whole words only
        ("The end.", {"forbidden_words": ["the"]}, F, F),
        ("Title\nthe end\nlast", {"forbidden_words": ["the"]}, F, F),
        ("   ", {"forbidden_words": ["x"]}, F, F),
    ],
    "keywords:letter_frequency": [
        ("Banana", {"letter": "a", "let_frequency": 3, "let_relation": "at least"}, T, T),
        ("BANANA", {"letter": "A", "let_frequency": 3, "let_relation": "less than"}, F, F),  # case-folded
        ("zzz", {"letter": "z", "let_frequency": 4, "let_relation": "less than"}, T, T),
        ("a\nbanana\na", {"letter": "a", "let_frequency": 4, "let_relation": "less than"}, F, T),  # loose drops lines
    ],
    "language:response_language": [
        ("Ceci est une réponse écrite entièrement en français pour le test.", {"language": "fr"}, T, T),
        ("This answer is written entirely in the English language for the test.", {"language": "fr"}, F, F),
        ("12345 !!!", {"language": "de"}, T, T),  # undetectable: passes, as upstream
        ("", {"language": "en"}, F, F),
    ],
    "length_constraints:number_sentences": [
        ("One. Two. Three.", {"num_sentences": 3, "relation": "at least"}, T, T),
        ("Mr. Smith left. He came back.", {"num_sentences": 3, "relation": "less than"}, T, T),  # "Mr." no break
        ("One. Two. Three. Four.", {"num_sentences": 3, "relation": "less than"}, F, F),
        ("A. B. C. D.", {"num_sentences": 3, "relation": "less than"}, T, T),  # "b", "c", "d" are abbreviations
        ("Intro line\nOne. Two. Three.\nOutro", {"num_sentences": 3, "relation": "less than"}, F, F),
    ],
    "length_constraints:number_paragraphs": [
        ("First part.\n***\nSecond part.", {"num_paragraphs": 2}, T, T),
        ("First.\n***\n\n***\nThird.", {"num_paragraphs": 2}, F, F),  # empty inner paragraph
        ("***\nOnly one.\n***", {"num_paragraphs": 1}, T, T),  # empty first/last pieces dropped
        ("One.\n* * *\nTwo.", {"num_paragraphs": 2}, F, F),
    ],
    "length_constraints:number_words": [
        ("one two three", {"num_words": 3, "relation": "at least"}, T, T),
        ("don't stop", {"num_words": 3, "relation": "less than"}, F, F),  # don, t, stop
        ("héllo wörld  ", {"num_words": 2, "relation": "at least"}, T, T),
        ("Title words here\nshort", {"num_words": 2, "relation": "less than"}, F, T),  # loose: first line dropped
    ],
    "length_constraints:nth_paragraph_first_word": [
        ("Intro.\n\nApple pie is good.", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "apple"}, T, T),
        ("Intro.\n\n\"Apple,\" she said.", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "Apple"}, T, T),
        ("Intro.\n\nBanana.", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "apple"}, F, F),
        ("Only one.", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "only"}, F, F),
    ],
    "detectable_content:number_placeholders": [
        ("Dear [name], see you at [place].", {"num_placeholders": 2}, T, T),
        ("Dear [name].", {"num_placeholders": 2}, F, F),
        ("[] [x]", {"num_placeholders": 2}, T, T),  # empty brackets count
    ],
    "detectable_content:postscript": [
        ("Hi.\nP.S. see you", {"postscript_marker": "P.S."}, T, T),
        ("Hi.\nP.P.S. see you", {"postscript_marker": "P.S."}, T, T),  # P.P.S. satisfies P.S.
        ("Hi.\np.p.s see you", {"postscript_marker": "P.P.S"}, T, T),
        ("Hi. PS see you", {"postscript_marker": "P.S."}, F, F),
    ],
    "detectable_format:number_bullet_lists": [
        ("* a\n* b\n- c", {"num_bullets": 3}, T, T),
        ("* a\n* b", {"num_bullets": 3}, F, F),
        ("**bold** line\n* a", {"num_bullets": 1}, T, T),  # "**" does not start a bullet
        ("Intro\n* a\n* b\n- outro", {"num_bullets": 2}, F, T),  # loose drops the last line
    ],
    "detectable_format:constrained_response": [
        ("My answer is yes.", {}, T, T),
        ("  Well... My answer is maybe. ", {}, T, T),
        ("my answer is yes.", {}, F, F),  # case-sensitive
    ],
    "detectable_format:number_highlighted_sections": [
        ("*one* and *two*", {"num_highlights": 2}, T, T),
        ("**bold**", {"num_highlights": 2}, F, F),  # counted once, by the **…** rule
        ("*a* **b**", {"num_highlights": 2}, T, T),
        ("* *", {"num_highlights": 1}, F, F),  # blank inside
        ("*a\nb*", {"num_highlights": 1}, F, F),
    ],
    "detectable_format:multiple_sections": [
        ("Section 1\nfoo\nSection 2\nbar", {"section_spliter": "Section", "num_sections": 2}, T, T),
        ("Section 1 only", {"section_spliter": "Section", "num_sections": 2}, F, F),
        ("section 1\nsection 2", {"section_spliter": "Section", "num_sections": 2}, F, F),  # case-sensitive
    ],
    "detectable_format:json_format": [
        ('{"a": 1}', {}, T, T),
        ('```json\n{"a": [1, 2]}\n```', {}, T, T),
        ("Here: {\"a\": 1}", {}, F, F),
        ('Sure:\n{"a": 1}', {}, F, T),  # loose drops the first line
    ],
    "detectable_format:title": [
        ("<<My Title>>\nbody", {}, T, T),
        ("<< >>\nbody", {}, F, F),
        ("<<two\nlines>>", {}, F, F),
        ("<<Ünïcode title>>", {}, T, T),
    ],
    "combination:two_responses": [
        ("First answer.\n******\nSecond answer.", {}, T, T),
        ("Same.\n******\nSame.", {}, F, F),
        ("One.\n******\n\n******\nTwo.", {}, F, F),  # empty middle response
        ("******\nOne.\n******\nTwo.\n******", {}, T, T),  # empty ends allowed
    ],
    "combination:repeat_prompt": [
        ("Write a poem. Roses are red.", {"prompt_to_repeat": "Write a poem."}, T, T),
        ("  WRITE A POEM. ok", {"prompt_to_repeat": "write a poem."}, T, T),
        ("Sure! Write a poem.", {"prompt_to_repeat": "Write a poem."}, F, F),
        ("Sure!\nWrite a poem. ok", {"prompt_to_repeat": "Write a poem."}, F, T),
    ],
    "startend:end_checker": [
        ("Text. Any other questions?", {"end_phrase": "Any other questions?"}, T, T),
        ('"Text. any other QUESTIONS?"  \n', {"end_phrase": "Any other questions?"}, T, T),
        ("Any other questions? Yes.", {"end_phrase": "Any other questions?"}, F, F),
        ("Any other questions?\n**", {"end_phrase": "Any other questions?"}, F, T),
    ],
    "change_case:capital_word_frequency": [
        ("THIS IS BIG news", {"capital_frequency": 3, "capital_relation": "at least"}, T, T),
        ("THIS IS BIG news", {"capital_frequency": 3, "capital_relation": "less than"}, F, F),
        ("I am here", {"capital_frequency": 1, "capital_relation": "at least"}, T, T),  # "I" counts
    ],
    "change_case:english_capital": [
        ("THIS IS AN ANSWER WRITTEN IN CAPITAL LETTERS ABOUT THE WEATHER.", {}, T, T),
        ("THIS IS an answer.", {}, F, F),
        ("12345", {}, F, F),  # no cased character: str.isupper() is False
    ],
    "change_case:english_lowercase": [
        (LOWER, {}, T, T),
        (LOWER.capitalize(), {}, F, F),
        ("Title\n" + LOWER, {}, F, T),  # loose drops the capitalised first line
        ("   ", {}, F, F),
    ],
    "punctuation:no_comma": [
        ("No commas here.", {}, T, T),
        ("One, two.", {}, F, F),
        ("Full-width ， is not a comma", {}, T, T),
        ("Intro, line\nbody", {}, F, T),
    ],
    "startend:quotation": [
        ('"Quoted."', {}, T, T),
        ('  "Quoted."  \n', {}, T, T),
        ('"', {}, F, F),
        ("“Curly”", {}, F, F),
    ],
}


def test_table_covers_every_ifeval_id() -> None:
    assert sorted(TABLE) == family_ids("ifeval")
    assert len(TABLE) == 25
    assert all(len(rows) >= 3 for rows in TABLE.values())


@pytest.mark.parametrize("cid,response,kwargs,strict,loose",
                         [(cid, *row) for cid, rows in TABLE.items() for row in rows])
def test_ifeval_checker_table(cid: str, response: str, kwargs: dict, strict: bool, loose: bool) -> None:
    assert check(cid, response, kwargs).ok is strict
    assert check(cid, response, kwargs, loose=True).ok is loose


@pytest.mark.parametrize("cid", sorted(TABLE))
def test_whitespace_only_fails_strict_and_loose(cid: str) -> None:
    kwargs = TABLE[cid][0][1]
    for text in ("", " ", "\n\t\n"):
        assert not check(cid, text, kwargs).ok
        assert not check(cid, text, kwargs, loose=True).ok


def test_spans_point_into_the_original_response() -> None:
    response = "Title, here\nbody without commas"
    res = check("punctuation:no_comma", response, {}, loose=True)
    assert res.ok and res.reason.startswith("loose (remove_first)")
    assert res.spans == [(12, 31)] and response[12:31] == "body without commas"
    res = check("keywords:existence", "intro\nthe *River* flows", {"keywords": ["river"]})
    assert res.spans == [(11, 16)]
    res = check("detectable_content:postscript", "**x**\nP.S. hi", {"postscript_marker": "P.S."})
    assert res.ok and "P.S." in "**x**\nP.S. hi"[res.spans[0][0]:res.spans[0][1]]
