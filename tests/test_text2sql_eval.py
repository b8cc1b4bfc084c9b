"""Spider/BIRD evaluators: official scoring on a hand-built layout and gold-vs-gold on the real data."""

from __future__ import annotations

import json
import math
import os
import time

import pytest
from text2sql_fixtures import answer, make_db

from evals.base import Evaluator
from evals.registry import EVALUATORS
from evals.text2sql import PAPER_BENCHMARKS, Text2SQLEvaluator, paper_average, spider_dev
from tasks.text2sql.templates import render_teacher_answer


def _data_dir() -> str:
    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data:
        pytest.skip("MRBENCH_DATA_DIR is not set (real Spider/BIRD data)")
    return data


@pytest.fixture()
def layout(tmp_path):
    make_db(tmp_path / "spider" / "database")
    rows = [
        {"db_id": "toy", "question": "Names?", "query": "SELECT name FROM emp"},
        {"db_id": "toy", "question": "Oldest first?", "query": "SELECT name FROM emp ORDER BY age DESC, id"},
        {"db_id": "toy", "question": "How many?", "query": "SELECT count(*) FROM emp"},
        {"db_id": "gone", "question": "Lost?", "query": "SELECT 1"},
        {"db_id": "toy", "question": "Broken gold?", "query": "SELECT nothing FROM nowhere"},
    ]
    (tmp_path / "spider" / "dev.json").write_text(json.dumps(rows))
    return tmp_path


def test_registry_names_resolve_to_evaluators():
    for name in PAPER_BENCHMARKS:
        ev = EVALUATORS.get(name)()
        assert isinstance(ev, Evaluator) and ev.name == name and ev.task == "text2sql"


def test_scoring_on_a_hand_built_layout(layout):
    ev = spider_dev()
    cases = ev.cases(str(layout))
    assert [c.id for c in cases] == [f"spider-dev-{i}" for i in range(5)]
    assert "CREATE TABLE emp" in cases[0].messages[-1]["content"] and "Names?" in cases[0].messages[-1]["content"]
    responses = {
        "spider-dev-0": "The query is:\n```sql\nSELECT DISTINCT name FROM emp ORDER BY name\n```",  # last sql block
        "spider-dev-1": answer("SELECT name FROM emp ORDER BY age ASC"),  # wrong order
        # spider-dev-2: missing response
        "spider-dev-3": answer("SELECT 1"),
        "spider-dev-4": answer("SELECT 1"),
    }
    report = ev.score(cases, responses)
    rows = {r["id"]: r for r in report.rows}
    assert rows["spider-dev-0"]["correct"] and rows["spider-dev-0"]["extraction"] == "last_sql_block"
    assert rows["spider-dev-1"]["correct"] is False and rows["spider-dev-1"]["reason"] == "mismatch"
    assert rows["spider-dev-2"]["reason"] == "missing_response"
    assert {s["id"] for s in report.skipped} == {"spider-dev-3", "spider-dev-4"}
    assert "database 'gone' is missing" in rows["spider-dev-3"]["reason"]
    assert rows["spider-dev-4"]["reason"].startswith("reference query failed")
    s = report.summary
    assert (s["n_cases"], s["n_scored"], s["n_correct"], s["n_skipped"], s["n_missing_response"]) == (5, 3, 1, 2, 1)
    assert s["execution_accuracy"] == pytest.approx(1 / 3)
    assert "| spider-dev | 33.33 | 3 | 1 | 2 |" in report.table


@pytest.mark.parametrize("response,correct,rule", [
    (answer("SELECT count(*) FROM emp"), True, "answer_sql_block"),
    ("<answer>SELECT count(*) FROM emp</answer>", True, "answer_text"),
    ("SELECT count(*) FROM emp", True, "whole_text"),
    ("```\nSELECT count(*) FROM emp\n```", True, "last_code_block"),
    ("```sql\nSELECT 1\n```\nfixed:\n```sql\nSELECT count(*) FROM emp\n```", True, "last_sql_block"),
    ("SELECT count(*) FROM emp; SELECT 1", True, "whole_text"),
    ("SELECT count(*) FROM emp WHERE age > = 0", True, "whole_text"),  # official repair of '> ='
    ("I cannot answer.", False, None),
    ("", False, None),
])
def test_lenient_extraction(layout, response, correct, rule):
    ev = spider_dev()
    case = ev.cases(str(layout))[2]
    row = ev.score_case(case, response)
    assert row["correct"] is correct
    assert row.get("extraction") == rule


def test_categories_filter(layout):
    ev = spider_dev()
    with pytest.raises(ValueError, match="unknown categories"):
        ev.cases(str(layout), categories=["hard"])


def test_paper_average():
    acc = {"spider-dev": 0.8, "spider-syn": 0.7, "spider-realistic": 0.6, "spider-dk": 0.5, "bird-dev": math.nan}
    avg = paper_average(acc)
    assert avg["average"] == pytest.approx(0.65)
    assert avg["missing"] == ["spider-test", "bird-dev"] and not avg["complete"]
    full = paper_average(dict.fromkeys(PAPER_BENCHMARKS, 0.5))
    assert full["average"] == 0.5 and full["complete"]
    assert math.isnan(paper_average({})["average"])


def test_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="spider/test.json"):
        Text2SQLEvaluator("spider-test").cases(str(tmp_path))
    with pytest.raises(ValueError, match="known: .*spider-dev"):
        Text2SQLEvaluator("spider-nope")


def _gold_report(name: str, data: str):
    ev = EVALUATORS.get(name)()
    cases = ev.cases(data)
    return cases, ev.score(cases, {c.id: render_teacher_answer(c.meta["query"]) for c in cases})


def test_spider_dev_gold_scores_itself_and_is_fast():
    data = _data_dir()
    start = time.perf_counter()
    _cases, report = _gold_report("spider-dev", data)
    elapsed = time.perf_counter() - start
    s = report.summary
    print(f"\nspider-dev gold vs gold: {s['n_correct']}/{s['n_scored']} correct, {s['n_skipped']} skipped, "
          f"{elapsed:.2f} s")
    assert s["n_cases"] == 1034
    assert s["n_correct"] == s["n_scored"] == 972
    assert s["n_skipped"] == 62 and all("'wta_1' is missing" in r["reason"] for r in report.skipped)
    assert elapsed < 120


@pytest.mark.parametrize("name,n_cases", [("spider-syn", 1034), ("spider-realistic", 508), ("spider-dk", 535)])
def test_spider_variants_gold_scores_itself(name, n_cases):
    _cases, report = _gold_report(name, _data_dir())
    s = report.summary
    print(f"\n{name} gold vs gold: {s['n_correct']}/{s['n_scored']} correct, {s['n_skipped']} skipped")
    assert s["n_cases"] == n_cases
    assert s["n_correct"] == s["n_scored"] > 0.85 * n_cases
    for r in report.skipped:  # only the missing wta_1 database, or a reference that cannot run
        assert "'wta_1' is missing" in r["reason"] or r["reason"].startswith("reference query failed")


def test_spider_syn_prompts_use_synonym_questions():
    data = _data_dir()
    syn = EVALUATORS.get("spider-syn")().cases(data)
    dev = EVALUATORS.get("spider-dev")().cases(data)
    assert syn[0].meta["question"] == "How many vocalists do we have?"
    assert syn[0].meta["query"] == dev[0].meta["query"]


def test_bird_dev_prompts_with_evidence_and_skips_without_databases():
    data = _data_dir()
    ev = EVALUATORS.get("bird-dev")()
    cases = ev.cases(data)
    assert len(cases) == 1534
    prompt = cases[0].messages[-1]["content"]
    assert "External knowledge: Eligible free rate" in prompt and "CREATE TABLE frpm" in prompt
    if all(c.meta.get("skip_reason") for c in cases):
        report = ev.score(cases, {c.id: render_teacher_answer(c.meta["query"]) for c in cases})
        assert report.summary["n_skipped"] == 1534 and math.isnan(report.summary["execution_accuracy"])
        assert "dev_databases" in report.skipped[0]["reason"]
    assert {c.category for c in cases} == {"simple", "moderate", "challenging"}


def test_spider_test_split_when_the_user_has_it(tmp_path):
    make_db(tmp_path / "spider" / "test_database")
    (tmp_path / "spider" / "test.json").write_text(json.dumps(
        [{"db_id": "toy", "question": "How many?", "query": "SELECT count(*) FROM emp"}]))
    ev = EVALUATORS.get("spider-test")()
    cases = ev.cases(str(tmp_path / "spider"))  # the benchmark folder itself also works
    assert cases[0].meta["db_path"].endswith(os.path.join("test_database", "toy", "toy.sqlite"))
    report = ev.score(cases, {cases[0].id: answer("SELECT count(id) FROM emp")})
    assert report.summary["execution_accuracy"] == 1.0


def test_cases_render_the_training_prompts_without_a_task_or_its_sandbox(layout, monkeypatch):
    """The evaluator's prompts and verifier fields are the training task's, from one renderer, and
    building them constructs no Text2SQLTask (whose sandbox and reference cache scoring never uses)."""
    from tasks.text2sql.data import load_records
    from tasks.text2sql.task import Text2SQLTask

    expected = {r.id: Text2SQLTask().messages_for(r) for r in load_records("spider-dev", str(layout))}

    def refuse(*args, **kwargs):
        raise AssertionError("the evaluator built a Text2SQLTask")

    monkeypatch.setattr(Text2SQLTask, "__init__", refuse)
    cases = spider_dev().cases(str(layout))
    assert cases and {c.id: c.messages for c in cases} == expected
    assert all(c.meta["match"] == "spider" and c.meta["query"] for c in cases)
