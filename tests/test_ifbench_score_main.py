"""``mrbench score ifollow`` on IFBench's official sample responses agrees with IFBench ``main``.

The sample responses (``sample_output.jsonl``) carry only the prompt, so each is joined to its
row of ``IFBench_test.jsonl`` by prompt (outer whitespace ignored, as IFBench's evaluator does).
The joined rows go through the CLI, and every verdict of the types whose rule the audit of
IFBench's unmerged pull request #34 touched is compared with an independent implementation of
IFBench ``main``'s rule written here (``ratio:overlap`` included, where lighteval's older copy
raises on a response without trigrams and so cannot serve as the oracle). Sentences and Treebank
tokens come from the project's offline splitters, as in ``test_ifbench_differential``, so that
the comparison isolates the checking rules.
"""

from __future__ import annotations

import json
import os
import string
from collections import Counter
from pathlib import Path

import pytest

from tasks.ifollow import textutil


def overlap_rule(response: str, kw: dict) -> bool:
    def grams(text: str) -> set:
        return set(zip(text, text[1:], text[2:]))

    mine = grams(response)
    if not mine:
        return False
    share = len(mine & grams(kw["reference_text"])) / len(mine) * 100
    return kw["percentage"] - 2 <= share <= kw["percentage"] + 2


def words_position_rule(response: str, kw: dict) -> bool:
    toks = textutil.treebank_words(response)
    if len(toks) < 2:
        return False
    skip = 1 if toks[-1] in string.punctuation else 0
    if len(toks) < 2 + skip:
        return False
    return toks[1].lower() == toks[-2 - skip].lower() == kw["keyword"].strip().lower()


def repeat_span_rule(response: str, kw: dict) -> bool:
    wanted = kw["prompt_to_repeat"][kw["n_start"]:kw["n_end"] + 1]
    return response.strip().lower() == wanted.strip().lower()


def keywords_multiple_rule(response: str, kw: dict) -> bool:
    low = response.lower()
    want = {"keyword1": 1, "keyword2": 2, "keyword3": 3, "keyword4": 5, "keyword5": 7}
    return all(low.count(kw[name].strip().lower()) == n for name, n in want.items())


def sentence_words_rule(response: str, kw: dict) -> bool:
    sentences = textutil.split_sentences(response)
    return len(sentences) == 3 and all(len(s.strip()) == len(sentences[0].strip()) for s in sentences)


def sentence_alphabet_rule(response: str, kw: dict) -> bool:
    sentences = textutil.split_sentences(response)
    if len(sentences) != 26:
        return False
    firsts = [s.lstrip().split()[:1] for s in sentences]
    return all(f and f[0].lower()[0] == chr(ord("a") + i) for i, f in enumerate(firsts))


MAIN_RULE = {
    "ratio:overlap": overlap_rule,
    "words:words_position": words_position_rule,
    "repeat:repeat_span": repeat_span_rule,
    "count:keywords_multiple": keywords_multiple_rule,
    "ratio:sentence_words": sentence_words_rule,
    "custom:sentence_alphabet": sentence_alphabet_rule,
}


def main_verdict(cid: str, response: str, kwargs: dict) -> bool:
    kw = {k: v for k, v in kwargs.items() if v is not None}
    return bool(response.strip()) and MAIN_RULE[cid](response, kw)  # IFBench skips blank responses


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict, dict, str]]:
    if "MRBENCH_DATA_DIR" not in os.environ:
        pytest.skip("MRBENCH_DATA_DIR is not set: the IFBench sample responses are not available")
    from harness.cli import main

    root = Path(os.environ["MRBENCH_DATA_DIR"]) / "ifbench"
    tests = {}
    for line in (root / "IFBench_test.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        tests[row["prompt"].strip()] = row
    joined = []
    for line in (root / "sample_output.jsonl").read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        test = tests.get(sample["prompt"].strip())
        if test is not None:
            joined.append({**test, "response": sample["response"]})
    work = tmp_path_factory.mktemp("score")
    (work / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in joined), encoding="utf-8")
    assert main(["score", "ifollow", "--data", str(work / "in.jsonl"), "--out", str(work / "out.jsonl")]) == 0
    out = [json.loads(x) for x in (work / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [o["id"] for o in out] == [str(r["key"]) for r in joined]
    return [(row, o, row["response"]) for row, o in zip(joined, out)]


def test_cli_agrees_with_main_on_every_audited_instance(scored):
    compared, differ = Counter(), []
    for row, out, response in scored:
        for k, (cid, kwargs) in enumerate(zip(row["instruction_id_list"], row["kwargs"])):
            if cid not in MAIN_RULE:
                continue
            got = out["rewards"][f"c{k}:{cid}"]
            want = main_verdict(cid, response, kwargs)
            compared[cid] += 1
            if got != float(want):
                differ.append((row["key"], k, cid, got, want))
    print(f"\ncompared with IFBench main's rule: {dict(compared)}")
    assert differ == []
    # Every instance of the audited types among the 293 joined rows.
    assert compared == {"ratio:overlap": 12, "words:words_position": 3, "repeat:repeat_span": 4,
                        "count:keywords_multiple": 5, "ratio:sentence_words": 7, "custom:sentence_alphabet": 1}


def test_main_rules_here_are_not_vacuous(scored):
    """The sample holds passing and failing overlap verdicts, so the comparison can catch a wrong rule."""
    verdicts = Counter()
    for row, _, response in scored:
        for cid, kwargs in zip(row["instruction_id_list"], row["kwargs"]):
            if cid == "ratio:overlap":
                verdicts[main_verdict(cid, response, kwargs)] += 1
    assert verdicts[True] >= 1 and verdicts[False] >= 1
