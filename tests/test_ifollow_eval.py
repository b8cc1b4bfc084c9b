"""IFEval / IFBench / MulDimIF / AdvancedIF evaluators: hand-computed figures, real layouts, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evals.base import EvalCase, Evaluator
from evals.ifollow import IFBenchEvaluator, IFEvalEvaluator, MulDimIFEvaluator
from evals.ifollow_judge import JUDGES, AdvancedIFEvaluator, JudgeNotConfigured, RubricVerdict
from evals.registry import EVALUATORS
from tasks.base import DataError

ROWS = [
    {"key": 1, "prompt": "p1", "instruction_id_list": ["punctuation:no_comma", "detectable_format:title"],
     "kwargs": [{}, {}]},
    {"key": 2, "prompt": "p2", "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]},
    {"key": 3, "prompt": "p3", "instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": ["tea"]}]},
]


def _data_dir() -> str:
    root = os.environ.get("MRBENCH_DATA_DIR")
    if not root:
        pytest.skip("MRBENCH_DATA_DIR is not set: real benchmark files unavailable")
    return root


@pytest.fixture()
def ifeval_dir(tmp_path: Path) -> Path:
    (tmp_path / "ifeval").mkdir()
    (tmp_path / "ifeval" / "input_data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return tmp_path


@pytest.mark.parametrize("name", ["ifeval", "ifbench", "muldimif", "advancedif"])
def test_registered_and_zero_arg(name: str) -> None:
    ev = EVALUATORS.get(name)()
    assert isinstance(ev, Evaluator) and ev.name == name and ev.task == "ifollow"


def test_hand_computed_four_figures(ifeval_dir: Path) -> None:
    ev = IFEvalEvaluator()
    cases = ev.cases(str(ifeval_dir))
    assert [c.id for c in cases] == ["1", "2", "3"]
    responses = {
        "1": "**<<Title>>**\nNo commas, here",  # comma: strict F, loose F (comma is on line 2 alone? no)
        "2": "Intro\nthis is all lowercase text written in english about tea and cakes",  # loose only
        # "3" missing: counted as the empty response
    }
    report = ev.score(cases, responses)
    rows = {r["id"]: r for r in report.rows}
    # case 1: no_comma strict F; loose: dropping the last line removes the comma -> T; title T/T
    assert rows["1"]["strict"] == [False, True] and rows["1"]["loose"] == [True, True]
    assert rows["2"]["strict"] == [False] and rows["2"]["loose"] == [True]
    assert rows["3"]["strict"] == [False] and rows["3"]["loose"] == [False] and rows["3"]["missing"]
    s = report.summary
    assert s["prompt_level_strict_acc"] == 0.0
    assert s["inst_level_strict_acc"] == pytest.approx(1 / 4)
    assert s["prompt_level_loose_acc"] == pytest.approx(2 / 3)
    assert s["inst_level_loose_acc"] == pytest.approx(3 / 4)
    assert s["n_prompts"] == 3 and s["n_instructions"] == 4
    assert "| prompt_level_loose_acc | 0.6667 |" in report.table


def test_category_filter(ifeval_dir: Path) -> None:
    assert [c.id for c in IFEvalEvaluator().cases(str(ifeval_dir), categories=["change_case"])] == ["2"]
    assert [c.id for c in IFEvalEvaluator().cases(str(ifeval_dir), categories=["detectable_format:title"])] == ["1"]


def test_unknown_id_names_file_row_and_known_ids(tmp_path: Path) -> None:
    bad = dict(ROWS[0], instruction_id_list=["punctuation:no_comma", "format:unheard_of"])
    path = tmp_path / "input_data.jsonl"
    path.write_text(json.dumps(ROWS[1]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"input_data\.jsonl, row 2: unknown constraint id 'format:unheard_of' "
                                        r"\(known ids.*keywords:existence"):
        IFEvalEvaluator().cases(str(path))


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="--data-dir"):
        IFEvalEvaluator().cases(None)
    with pytest.raises(DataError, match="IFBench_test.jsonl not found"):
        IFBenchEvaluator().cases(str(tmp_path))
    with pytest.raises(DataError, match="test.json not found"):
        MulDimIFEvaluator().cases(str(tmp_path))


def test_real_layouts_load_with_official_ids() -> None:
    root = _data_dir()
    ifeval = IFEvalEvaluator().cases(root)
    ifbench = IFBenchEvaluator().cases(root)
    muldimif = MulDimIFEvaluator().cases(root)
    assert (len(ifeval), len(ifbench), len(muldimif)) == (541, 300, 1200)
    assert ifeval[0].id == "1000" and sum(len(c.meta["constraints"]) for c in ifeval) == 834
    assert len({c.id for c in ifbench}) == 300
    assert sum(len(c.meta["constraints"]) for c in muldimif) == 4180
    assert muldimif[0].id == "100000473" and muldimif[0].messages[-1]["role"] == "user"


def test_empty_responses_score_zero_everywhere() -> None:
    root = _data_dir()
    for ev in (IFEvalEvaluator(), IFBenchEvaluator()):
        s = ev.score(ev.cases(root), {}).summary
        assert s["prompt_level_strict_acc"] == s["inst_level_loose_acc"] == 0.0
    ev = MulDimIFEvaluator()
    assert ev.score(ev.cases(root), {}).summary["accuracy"] == 0.0


def test_ifbench_sample_outputs_figures_and_invariants(tmp_path: Path) -> None:
    from evals.runner import run_eval

    root = _data_dir()
    sample = [json.loads(line) for line in (Path(root) / "ifbench" / "sample_output.jsonl").open()]
    cases = IFBenchEvaluator().cases(root)
    by_prompt = {c.meta["prompt"].strip(): c.id for c in cases}
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": by_prompt[r["prompt"].strip()], "response": r["response"]}) + "\n"
                             for r in sample if r["prompt"].strip() in by_prompt))
    summary = run_eval("ifbench", out_dir=tmp_path / "out", predictions=str(preds), data_dir=root)
    print(f"\nIFBench sample outputs: {summary['table']}")
    for level in ("prompt_level", "inst_level"):
        assert summary[f"{level}_loose_acc"] >= summary[f"{level}_strict_acc"]
    assert 0.15 < summary["prompt_level_strict_acc"] < 0.45
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    assert len(rows) == 300 and sum(r["missing"] for r in rows) == summary["missing_predictions"]


def test_muldimif_hand_computed(tmp_path: Path) -> None:
    rows = [
        {"id": "x", "conversations": [{"role": "user", "content": "q"}], "constraint_pattern": "Listing",
         "difficulty": "Level 1", "constraints": [["Length", "Words", "The response must contain no more than 5 words"]]},
        {"id": "y", "conversations": [{"role": "user", "content": "q"}], "constraint_pattern": "Example",
         "difficulty": "Level 1", "constraints": [["Length", "Words", "The response must contain at least 3 words"]]},
    ]
    (tmp_path / "test.json").write_text(json.dumps(rows))
    ev = MulDimIFEvaluator()
    cases = ev.cases(str(tmp_path))
    report = ev.score(cases, {"x": "one two three", "y": "one two"})
    assert [r["correct"] for r in report.rows] == [True, False]
    assert report.summary["accuracy"] == 0.5
    assert report.summary["by_group"]["pattern:Listing"]["accuracy"] == 1.0
    assert report.summary["by_group"]["difficulty:Level 1"] == {"n": 2, "accuracy": 0.5}
    assert [c.id for c in ev.cases(str(tmp_path), categories=["Example"])] == ["y"]


class _LengthJudge:
    name = "length-judge"

    def grade(self, messages, response, rubric):
        if response == "boom":
            raise RuntimeError("judge down")
        return [RubricVerdict(len(response) > 3, "long enough?") for _ in rubric]


def _adv_cases() -> list[EvalCase]:
    return [EvalCase(id="a", messages=[{"role": "user", "content": "q"}], meta={"rubric": ["r1", "r2"]}),
            EvalCase(id="b", messages=[{"role": "user", "content": "q"}], meta={"rubric": ["r1"]}),
            EvalCase(id="c", messages=[{"role": "user", "content": "q"}], meta={"rubric": ["r1"]})]


def test_advancedif_without_judge_explains_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MRBENCH_JUDGE", raising=False)
    with pytest.raises(JudgeNotConfigured, match=r"register_judge.*MRBENCH_JUDGE"):
        AdvancedIFEvaluator().score(_adv_cases(), {"a": "x"})
    monkeypatch.setenv("MRBENCH_JUDGE", "no-such-judge")
    with pytest.raises(JudgeNotConfigured, match="'no-such-judge' is not registered"):
        AdvancedIFEvaluator().score(_adv_cases(), {"a": "x"})


def test_advancedif_with_a_judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if "length-judge" not in JUDGES:
        JUDGES.add("length-judge", _LengthJudge)
    monkeypatch.setenv("MRBENCH_JUDGE", "length-judge")
    report = AdvancedIFEvaluator().score(_adv_cases(), {"a": "long answer", "b": "no", "c": "boom"})
    assert report.summary["prompt_level_acc"] == 0.5 and report.summary["item_level_acc"] == pytest.approx(2 / 3)
    assert report.skipped == [{"id": "c", "reason": "judge failed: RuntimeError: judge down"}]
    (tmp_path / "adv.jsonl").write_text(json.dumps({"id": "q1", "prompt": "hi", "rubrics": ["greets"]}) + "\n")
    cases = AdvancedIFEvaluator(judge=_LengthJudge()).cases(str(tmp_path / "adv.jsonl"))
    assert cases[0].meta["rubric"] == ["greets"]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"id": "q1", "prompt": "hi"}) + "\n")
    with pytest.raises(DataError, match=r"bad\.jsonl, row 1: .*rubric"):
        AdvancedIFEvaluator().cases(str(tmp_path / "bad.jsonl"))
