"""Each benchmark scored from a file in its official evaluator's format, on the real data.

For every family: a file built from the gold answers (or, where there are none, from responses
known to pass or fail) scores as expected, and one deliberately broken row changes exactly one
verdict. The data comes from ``MRBENCH_DATA_DIR``; each test skips with a reason without it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from text2sql_fixtures import make_db

from evals.bfcl import BFCLv4Evaluator, score_case
from evals.ifollow import IFBenchEvaluator, IFEvalEvaluator
from evals.runner import run_eval
from harness import cli
from tasks.ifollow.witness import find_witness
from tasks.toolcall.bfcl_gold import gold_calls, gold_response, gold_result


def _data_dir() -> str:
    root = os.environ.get("MRBENCH_DATA_DIR")
    if not root:
        pytest.skip("MRBENCH_DATA_DIR is not set: the real benchmark files are needed")
    return root


def _rows(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def _changed(a: dict[str, dict], b: dict[str, dict], key: str) -> list[str]:
    return [cid for cid in a if a[cid].get(key) != b[cid].get(key)]


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return str(path)


# -- Spider -------------------------------------------------------------------------------------------------
def test_spider_dev_from_one_query_per_line(tmp_path):
    data = _data_dir()
    questions = json.loads((Path(data) / "spider" / "dev.json").read_text())
    lines = [q["query"] for q in questions]
    (tmp_path / "pred.sql").write_text("\n".join(lines) + "\n")
    s = run_eval("spider-dev", out_dir=tmp_path / "gold", predictions=str(tmp_path / "pred.sql"), data_dir=data)
    assert s["predictions_format"] == "sql-lines"
    assert (s["n_correct"], s["n_scored"], s["n_skipped"]) == (972, 972, 62)
    assert s["missing_predictions"] == s["unmatched_predictions"] == 0 and s["prediction_warnings"] == []
    skipped = [json.loads(line) for line in (tmp_path / "gold" / "skipped.jsonl").read_text().splitlines()]
    assert len(skipped) == 62 and all("'wta_1' is missing" in r["reason"] for r in skipped)
    # the official gold file itself (SQL<TAB>db_id per line) reads the same way (first 200 questions)
    g = run_eval("spider-dev", out_dir=tmp_path / "g2", predictions=str(Path(data) / "spider" / "dev_gold.sql"),
                 data_dir=data, limit=200)
    assert g["n_correct"] == g["n_scored"] == 200 - g["n_skipped"] and g["unmatched_predictions"] == 834
    broken = 5
    assert questions[broken]["db_id"] != "wta_1"
    lines[broken] = "SELECT 1"
    (tmp_path / "broken.sql").write_text("\n".join(lines) + "\n")
    run_eval("spider-dev", out_dir=tmp_path / "broken", predictions=str(tmp_path / "broken.sql"), data_dir=data,
             limit=200)
    gold = {cid: row for cid, row in _rows(tmp_path / "gold").items() if int(cid.rsplit("-", 1)[1]) < 200}
    assert _changed(gold, _rows(tmp_path / "broken"), "correct") == [f"spider-dev-{broken}"]


def test_spider_dev_rows_keyed_by_row_index_and_ids_that_match_nothing(tmp_path, capsys):
    data = _data_dir()
    questions = json.loads((Path(data) / "spider" / "dev.json").read_text())
    by_index = _jsonl(tmp_path / "index.jsonl", [{"id": i, "response": q["query"]} for i, q in enumerate(questions)])
    assert cli.main(["eval", "spider-dev", "--predictions", by_index, "--out", str(tmp_path / "o"),
                     "--data-dir", data]) == 0
    out = capsys.readouterr().out
    assert "predictions read as jsonl" in out and "| spider-dev | 100.00 | 972 | 972 | 62 |" in out
    wrong = _jsonl(tmp_path / "wrong.jsonl", [{"id": f"q{i}", "response": q["query"]} for i, q in enumerate(questions)])
    assert cli.main(["eval", "spider-dev", "--predictions", wrong, "--out", str(tmp_path / "w"),
                     "--data-dir", data]) == 2
    err = capsys.readouterr().err
    assert "none of the 1034 predictions" in err
    assert "expected an id such as 'spider-dev-0' (or its row index, 0), got id 'q0' (line 1)" in err


# -- BIRD ---------------------------------------------------------------------------------------------------
def _bird_file(path: Path, questions: list[dict]) -> str:
    path.write_text(json.dumps({str(i): f"{q['SQL']}\t----- bird -----\t{q['db_id']}" for i, q in enumerate(questions)},
                               indent=4))
    return str(path)


def test_bird_dev_predict_dev_json_matches_every_question_and_reports_the_skips(tmp_path):
    data = _data_dir()
    questions = json.loads((Path(data) / "bird" / "dev.json").read_text())
    if (Path(data) / "bird" / "dev_databases").is_dir():
        pytest.skip("this test is about the data without BIRD's databases")
    s = run_eval("bird-dev", out_dir=tmp_path / "o", predictions=_bird_file(tmp_path / "predict_dev.json", questions),
                 data_dir=data)
    assert s["predictions_format"] == "bird-json" and s["cases"] == 1534
    assert s["missing_predictions"] == s["unmatched_predictions"] == 0
    assert s["n_skipped"] == 1534 and s["n_scored"] == 0
    first = json.loads((tmp_path / "o" / "skipped.jsonl").read_text().splitlines()[0])
    assert first["id"] == "bird-dev-0" and "database 'california_schools' is missing" in first["reason"]


def test_bird_predict_dev_json_on_a_hand_built_database(tmp_path):
    make_db(tmp_path / "bird" / "dev_databases")
    questions = [{"question_id": i, "db_id": "toy", "question": q, "evidence": "", "SQL": sql, "difficulty": "simple"}
                 for i, (q, sql) in enumerate([("How many?", "SELECT count(*) FROM emp"),
                                               ("Names?", "SELECT name FROM emp"),
                                               ("Depts?", "SELECT name FROM dept ORDER BY id")])]
    (tmp_path / "bird" / "dev.json").write_text(json.dumps(questions))
    s = run_eval("bird-dev", out_dir=tmp_path / "gold", predictions=_bird_file(tmp_path / "p.json", questions),
                 data_dir=str(tmp_path))
    assert s["execution_accuracy"] == 1.0 and s["n_scored"] == 3
    questions[1]["SQL"] = "SELECT name FROM dept"
    run_eval("bird-dev", out_dir=tmp_path / "broken", predictions=_bird_file(tmp_path / "b.json", questions),
             data_dir=str(tmp_path))
    assert _changed(_rows(tmp_path / "gold"), _rows(tmp_path / "broken"), "correct") == ["bird-dev-1"]


# -- IFEval / IFBench -----------------------------------------------------------------------------------------
def test_ifeval_official_responses_match_by_prompt_as_ids_do(tmp_path):
    data = _data_dir()
    cases = IFEvalEvaluator().cases(data)[:60]
    responses = {c.id: find_witness([tuple(x) for x in c.meta["constraints"]]) or "I cannot." for c in cases}
    official = _jsonl(tmp_path / "input_response_data.jsonl",
                      [{"prompt": c.meta["prompt"], "response": responses[c.id]} for c in cases])
    keyed = _jsonl(tmp_path / "keyed.jsonl", [{"id": c.id, "response": responses[c.id]} for c in cases])
    by_prompt = run_eval("ifeval", out_dir=tmp_path / "prompt", predictions=official, data_dir=data, limit=60)
    by_id = run_eval("ifeval", out_dir=tmp_path / "id", predictions=keyed, data_dir=data, limit=60)
    assert by_prompt["predictions_format"] == "ifeval-responses" and by_id["predictions_format"] == "jsonl"
    assert by_prompt["missing_predictions"] == by_prompt["unmatched_predictions"] == 0
    assert _rows(tmp_path / "prompt") == _rows(tmp_path / "id")
    witnessed = [c.id for c in cases if responses[c.id] != "I cannot."]
    assert len(witnessed) >= 20 and all(all(_rows(tmp_path / "id")[cid]["strict"]) for cid in witnessed)
    assert by_prompt["prompt_level_strict_acc"] >= len(witnessed) / 60
    broken = witnessed[0]
    responses[broken] = ""
    _jsonl(tmp_path / "broken.jsonl", [{"prompt": c.meta["prompt"], "response": responses[c.id]} for c in cases])
    run_eval("ifeval", out_dir=tmp_path / "broken", predictions=str(tmp_path / "broken.jsonl"), data_dir=data, limit=60)
    assert _changed(_rows(tmp_path / "prompt"), _rows(tmp_path / "broken"), "strict") == [broken]


def test_ifbench_sample_output_by_prompt_gives_the_verdicts_of_the_id_keyed_file(tmp_path):
    data = _data_dir()
    sample = Path(data) / "ifbench" / "sample_output.jsonl"
    rows = [json.loads(line) for line in sample.read_text().splitlines()]
    by_prompt = run_eval("ifbench", out_dir=tmp_path / "prompt", predictions=str(sample), data_dir=data)
    assert by_prompt["predictions_format"] == "ifeval-responses"
    # 294 responses: 293 find their prompt (290 exactly, 3 up to surrounding whitespace), one matches none
    assert (by_prompt["missing_predictions"], by_prompt["unmatched_predictions"]) == (7, 1)
    cases = {c.meta["prompt"].strip(): c.id for c in IFBenchEvaluator().cases(data)}
    keyed = [{"id": cases[r["prompt"].strip()], "response": r["response"]} for r in rows if r["prompt"].strip() in cases]
    run_eval("ifbench", out_dir=tmp_path / "id", predictions=_jsonl(tmp_path / "keyed.jsonl", keyed), data_dir=data)
    prompt_rows, id_rows = _rows(tmp_path / "prompt"), _rows(tmp_path / "id")
    assert prompt_rows == id_rows
    passing = next(k for k in keyed if all(id_rows[k["id"]]["strict"]))
    broken = [dict(r, response="") if r["prompt"].strip() in cases and cases[r["prompt"].strip()] == passing["id"]
              else r for r in rows]
    run_eval("ifbench", out_dir=tmp_path / "broken", predictions=_jsonl(tmp_path / "b.jsonl", broken), data_dir=data)
    assert _changed(prompt_rows, _rows(tmp_path / "broken"), "strict") == [passing["id"]]


# -- BFCL ---------------------------------------------------------------------------------------------------
NO_CALL = "There is no suitable function for this request."


def _bfcl_result(case, form: str = "text") -> object:
    if not case.meta["answers"]:
        return NO_CALL
    if form == "list":
        return [{c.name: c.parameters} for c in gold_calls(case.meta["functions"], case.meta["answers"],
                                                           case.meta["language"])]
    return gold_result(case.meta["functions"], case.meta["answers"], case.meta["language"])


def test_bfcl_result_files_score_as_the_rlla_oracle_does(tmp_path):
    data = _data_dir()
    cases = BFCLv4Evaluator().cases(data)
    rlla = {c.id: score_case(c, gold_response(c.meta["functions"], c.meta["answers"], c.meta["language"])
                             if c.meta["answers"] else f"<think> none </think>\n<response> {NO_CALL} </response>")
            for c in cases}
    # the official layout: one result file per category, in folders; Python list-form results for `multiple`
    for c in cases:
        folder = tmp_path / "result" / ("live" if c.category.startswith("live") else "non_live")
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"BFCL_v4_{c.category}_result.json").open("a") as fh:
            form = "list" if c.category == "multiple" else "text"
            fh.write(json.dumps({"id": c.id, "result": _bfcl_result(c, form)}) + "\n")
    s = run_eval("bfcl-v4", out_dir=tmp_path / "bfcl", predictions=str(tmp_path / "result"), data_dir=data)
    assert s["predictions_format"] == "bfcl-result" and s["format_rate"] is None
    assert s["missing_predictions"] == s["unmatched_predictions"] == 0
    assert s["non_live_macro"] > 0.99 and s["live_micro"] > 0.99 and s["irrelevance"] == s["live_irrelevance"] == 1.0
    official = _rows(tmp_path / "bfcl")
    assert _changed(official, rlla, "valid") == []  # the same verdicts as the oracle in the RLLA format
    # one broken result changes exactly one verdict
    target = next(c for c in cases if c.category == "simple_python" and official[c.id]["valid"])
    lines = [json.dumps({"id": c.id, "result": "[no_such_function(a=1)]" if c is target else _bfcl_result(c)})
             for c in cases if c.category == "simple_python"]
    (tmp_path / "broken.json").write_text("\n".join(lines) + "\n")
    run_eval("bfcl-v4", out_dir=tmp_path / "broken", predictions=str(tmp_path / "broken.json"), data_dir=data,
             categories=["simple_python"])
    broken = _rows(tmp_path / "broken")
    assert _changed(broken, official, "valid") == [target.id]
    assert broken[target.id]["error_type"] == "simple_function_checker:wrong_func_name"
