"""Differential check of the IFBench checkers against an official copy of IFBench's checker code.

lighteval 0.13 packages IFBench's ``instructions.py`` (Apache-2.0, AllenAI) — an older snapshot
than the upstream repository head that our checkers follow. We import it as an oracle only (it is
installed by ``scripts/setup.sh --dev`` without its dependencies; the test skips without it),
feeding it the same offline sentence splitter, Treebank tokenizer and stop-word list, so that the
comparison isolates the checking rules.

Types whose rule changed between that snapshot and upstream head are compared nowhere; they are
listed in ``CHANGED_SINCE_SNAPSHOT`` with the change. Where the snapshot raises (it lacks some
guards the head added) there is no official verdict, and the pair is skipped. Everywhere else
the verdicts must agree exactly.
"""

from __future__ import annotations

import json
import os
import random
import string
from pathlib import Path

import pytest

import tasks.ifollow.constraints.ifbench  # noqa: F401
from tasks.ifollow import textutil
from tasks.ifollow.constraints.base import get_constraint
from tasks.ifollow.constraints.ifbench import IFBENCH_IDS
from tasks.ifollow.constraints.ifbench_lexicon import STOP_WORDS

CHANGED_SINCE_SNAPSHOT = {
    "ratio:overlap": "snapshot takes character trigrams; head takes Treebank-word trigrams",
    "format:title_case": "head skips tokens not starting with a letter and checks one-letter words",
    "count:person_names": "snapshot matches names as substrings; head as whole words",
    "count:pronouns": "head extends the pronoun list and reads '/' as a space",
    "sentence:keyword": "snapshot: case-insensitive substring; head: whole word",
    "words:words_position": "head drops punctuation tokens and compares case-insensitively",
    "words:keywords_specific_position": "head drops punctuation tokens and compares case-insensitively",
    "words:start_verb": "needs NLTK's POS tagger (not available offline; we use a lexicon)",
}

KWARGS = {
    "count:word_count_range": {"min_words": 2, "max_words": 12}, "count:unique_word_count": {"N": 4},
    "ratio:stop_words": {"percentage": 40.0}, "count:conjunctions": {"small_n": 1}, "count:numbers": {"N": 1},
    "count:words_japanese": {"N": 2}, "words:repeats": {"small_n": 1}, "sentence:increment": {"small_n": 1},
    "format:options": {"options": "yes/no/maybe"}, "format:list": {"sep": "-"},
    "count:keywords_multiple": dict(keyword1="a", keyword2="b", keyword3="c", keyword4="d", keyword5="e"),
    "repeat:repeat_change": {"prompt_to_repeat": "Write a poem about the sea."},
    "repeat:repeat_span": {"prompt_to_repeat": "Write a poem about the sea.", "n_start": 1, "n_end": 3},
}
PIECES = ["\n", "\n\n", "* ", "- ", "  ", "|", ",", '"', "'", "“", "”", "(", "[", "{", ")", "]", "}", "?!", ". ", "! ",
          "? ", "<i>", "</i>", "😀", "日本", "a", "b", "c", "and", "the", "yes", "Sea", "poem", "12", "3.5", "level",
          "Question 1: ", "A. x", "14, 21, 28", "1805-12-02", "Zimbabwe", "My Answer:", ";", ":"]


@pytest.fixture(scope="module")
def oracle():
    pytest.importorskip("lighteval", reason="lighteval (IFBench oracle) is installed by scripts/setup.sh --dev")
    import nltk

    with pytest.MonkeyPatch.context() as mp:
        import lighteval.utils.imports as li

        mp.setattr(li, "raise_if_package_not_available", lambda *a, **k: None)  # spacy: not used here
        import lighteval.tasks.tasks.ifeval.instructions_utils as util

        mp.setattr(util, "split_into_sentences", textutil.split_sentences)
        mp.setattr(util, "count_stopwords",
                   lambda text: sum(1 for t in textutil.WORD_RE.findall(text) if t.lower() in STOP_WORDS))
        mp.setattr(nltk, "word_tokenize", lambda text, *a, **k: textutil.treebank_words(text))
        from lighteval.tasks.tasks.ifbench.instructions_registry import INSTRUCTION_DICT

        def verdict(cid: str, response: str, kwargs: dict) -> bool | None:
            inst = INSTRUCTION_DICT[cid](cid)
            inst.build_description(**{k: v for k, v in kwargs.items() if v is not None})
            try:
                return bool(response and response.strip() and inst.check_following(response))
            except Exception:  # the snapshot lacks guards the head has: no official verdict
                return None

        yield verdict


def compare(oracle, cases) -> tuple[int, list]:
    agreed, differ = 0, []
    for cid, response, kwargs in cases:
        if cid in CHANGED_SINCE_SNAPSHOT:
            continue
        want = oracle(cid, response, kwargs)
        if want is None:
            continue
        got = get_constraint(cid).checker(response, kwargs).ok
        if got == want:
            agreed += 1
        else:
            differ.append((cid, response[:80], want, got))
    return agreed, differ


def test_agrees_with_official_on_the_real_sample_responses(oracle):
    if "MRBENCH_DATA_DIR" not in os.environ:
        pytest.skip("MRBENCH_DATA_DIR is not set: the IFBench sample responses are not available")
    root = Path(os.environ["MRBENCH_DATA_DIR"]) / "ifbench"
    tests = {json.loads(x)["prompt"].strip(): json.loads(x) for x in (root / "IFBench_test.jsonl").open()}
    cases = []
    for line in (root / "sample_output.jsonl").open():
        row = json.loads(line)
        test = tests.get(row["prompt"].strip())
        if test:
            cases += [(c, row["response"], k) for c, k in zip(test["instruction_id_list"], test["kwargs"])]
    agreed, differ = compare(oracle, cases)
    print(f"\nIFBench sample: {agreed} verdicts agree with the official snapshot, {len(differ)} differ")
    assert differ == [] and agreed >= 270


def test_agrees_with_official_on_random_texts(oracle):
    rng = random.Random(0)
    alphabet = string.printable + "é漢字😀‽“”—\u00a0"
    texts = []
    for _ in range(400):
        if rng.random() < 0.5:
            texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 100))))
        else:
            texts.append("".join(rng.choice(PIECES) + rng.choice(["", " "]) for _ in range(rng.randint(1, 25))))
    cases = [(cid, t, KWARGS.get(cid, {})) for t in texts for cid in IFBENCH_IDS]
    agreed, differ = compare(oracle, cases)
    print(f"\nrandom texts: {agreed} verdicts agree with the official snapshot, {len(differ)} differ")
    assert differ == [] and agreed > 15_000
