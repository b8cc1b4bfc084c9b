"""Prediction files: format detection, the readers, matching to cases and the guard against a silent zero."""

from __future__ import annotations

import json

import pytest
from fake_plugins import ShoutEvaluator, ShoutTask

from evals import runner as eval_runner
from evals.base import EvalCase
from evals.prediction_formats import FORMATS, detect_format, read_prediction_file
from evals.prediction_match import (
    MatchResult,
    PredictionsDoNotMatch,
    match_predictions,
    match_warnings,
    require_a_match,
)
from harness import cli, scoring
from tasks.base import DataError

SQL_CASES = [EvalCase(f"spider-dev-{i}", [], "", {"row": i, "db_id": db}) for i, db in enumerate(["a", "a", "b"])]
PROMPT_CASES = [EvalCase("1000", [], "", {"prompt": "Write a poem."}),
                EvalCase("1001", [], "", {"prompt": "  Say hi.\n"})]


def _file(tmp_path, text: str, name: str = "p") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("text,expected", [
    ('{"id": "a", "response": "x"}\n', "jsonl"),
    ('{"key": 3, "response": "x"}\n{"prompt": "p", "response": "y"}\n', "jsonl"),
    ('\n{"prompt": "p", "response": "y"}\n', "ifeval-responses"),
    ('{"id": "simple_python_0", "result": "[f(a=1)]"}\n', "bfcl-result"),
    ('{\n    "0": "SELECT 1\\t----- bird -----\\tdb",\n    "1": "SELECT 2\\t----- bird -----\\tdb"\n}\n', "bird-json"),
    ('{"0": "SELECT 1"}', "bird-json"),
    ("SELECT count(*) FROM singer\tconcert_singer\nSELECT 1\n", "sql-lines"),
    ("\ufeffSELECT 1\n", "sql-lines"),  # a byte-order mark is ignored
    ("{not json\n", "jsonl"),  # its reader names the line
])
def test_detect_format(tmp_path, text, expected):
    assert detect_format(_file(tmp_path, text)) == expected


@pytest.mark.parametrize("text,message", [
    ("", "holds no predictions"),
    ("\n  \n", "holds no predictions"),
    ('[{"id": 1}]', "a JSON array is not a predictions format"),
])
def test_detect_format_errors_name_the_file(tmp_path, text, message):
    with pytest.raises(DataError, match=rf"{tmp_path}.*{message}"):
        detect_format(_file(tmp_path, text))


def test_sql_lines_keep_positions_and_databases(tmp_path):
    file = read_prediction_file(_file(tmp_path, "SELECT 1\tdb_a\n\n  SELECT 2  \n\n\n"))
    preds = file.predictions
    assert file.format == "sql-lines" and file.detected
    assert [(p.position, p.response, p.db_id) for p in preds] == [(0, "SELECT 1", "db_a"), (1, "", None),
                                                                 (2, "SELECT 2", None)]  # trailing blanks dropped
    assert preds[1].where == "line 2"


def test_bird_json_keys_are_positions(tmp_path):
    data = {"1": "SELECT 2\t----- bird -----\tfinancial", "0": "SELECT 1", "2": None}
    preds = read_prediction_file(_file(tmp_path, json.dumps(data))).predictions
    assert [(p.position, p.response, p.db_id) for p in preds] == [(1, "SELECT 2", "financial"), (0, "SELECT 1", None),
                                                                 (2, "", None)]
    with pytest.raises(DataError, match=r"key 'q1' is not a question index"):
        read_prediction_file(_file(tmp_path, json.dumps({"0": "x", "q1": "y"}), "b.json"), "bird-json")


def test_bfcl_results_from_a_file_or_a_folder(tmp_path):
    (tmp_path / "r" / "non_live").mkdir(parents=True)
    (tmp_path / "r" / "non_live" / "BFCL_v4_simple_python_result.json").write_text(
        json.dumps({"id": "simple_python_0", "result": "[f(a=1)]", "latency": 1.0}) + "\n")
    (tmp_path / "r" / "BFCL_v4_multiple_result.json").write_text(
        json.dumps({"id": "multiple_0", "result": [{"g": '{"b": 2}'}]}) + "\n")
    file = read_prediction_file(tmp_path / "r")
    assert file.format == "bfcl-result"
    assert [(p.id, p.response, p.where) for p in file.predictions] == [
        ("multiple_0", '[{"g": "{\\"b\\": 2}"}]', "BFCL_v4_multiple_result.json, line 1"),
        ("simple_python_0", "[f(a=1)]", "non_live/BFCL_v4_simple_python_result.json, line 1")]
    bad = _file(tmp_path, '{"id": "x", "result": "[]"}\n{"id": "y"}\n', "bad.json")
    with pytest.raises(DataError, match=r"bad\.json, row 2: row needs 'id' and 'result'"):
        read_prediction_file(bad)


@pytest.mark.parametrize("text,fmt,message", [
    ('{"id": "a", "output": "x"}\n', None, r"row 1: row has no 'response' field"),
    ('{"id": "a", "response": "x"}\n[1]\n', None, r"row 2: each line must be a JSON object"),
    ('{"id": "a", "response": "x"}\n{oops\n', None, r"row 2: not valid JSON"),
    ('{"id": "a", "response": "x"}\n', "ifeval-responses", r"row 1: row has no 'prompt' string"),
])
def test_bad_rows_name_file_and_row(tmp_path, text, fmt, message):
    with pytest.raises(DataError, match=message):
        read_prediction_file(_file(tmp_path, text), fmt)


def test_unknown_format_lists_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown predictions format 'csv'; known: jsonl, ifeval-responses"):
        read_prediction_file(_file(tmp_path, "x"), "csv")
    assert set(FORMATS) == {"jsonl", "ifeval-responses", "sql-lines", "bird-json", "bfcl-result"}


def _match(tmp_path, text, cases, fmt=None):
    return match_predictions(read_prediction_file(_file(tmp_path, text), fmt), cases)


@pytest.mark.parametrize("text,responses,unmatched", [
    # the project's ids, the row index (as a number or text), and ids that match nothing
    ('{"id": "spider-dev-0", "response": "A"}\n{"id": 1, "response": "B"}\n{"id": "2", "response": "C"}\n',
     {"spider-dev-0": "A", "spider-dev-1": "B", "spider-dev-2": "C"}, []),
    ('{"id": "q0", "response": "A"}\n{"id": 7, "response": "B"}\n{"response": "C"}\n',
     {}, ["id 'q0' (line 1)", "id '7' (line 2)", "no id, key or prompt (line 3)"]),
    # positions, with the database checked when the line names one
    ("A\ta\nB\tb\nC\tb\nD\n", {"spider-dev-0": "A", "spider-dev-2": "C"},
     ["names database 'b', but question 1 is on 'a' (line 2)", "question 3 (line 4)"]),
])
def test_matching_text2sql_cases(tmp_path, text, responses, unmatched):
    result = _match(tmp_path, text, SQL_CASES)
    assert result.responses == responses and result.unmatched == unmatched
    assert result.missing == [c.id for c in SQL_CASES if c.id not in responses]


def test_matching_by_prompt_text(tmp_path):
    rows = [{"prompt": "Write a poem.", "response": "A"}, {"prompt": "Say hi.", "response": "B"},
            {"prompt": "write a poem.", "response": "C"}]
    result = _match(tmp_path, "".join(json.dumps(r) + "\n" for r in rows), PROMPT_CASES)
    assert result.responses == {"1000": "A", "1001": "B"}  # exact text, else equal up to surrounding whitespace
    assert result.unmatched == ["prompt 'write a poem.' (line 3)"]


def test_a_later_prediction_replaces_an_earlier_one(tmp_path):
    result = _match(tmp_path, '{"id": 0, "response": "A"}\n{"id": "spider-dev-0", "response": "B"}\n', SQL_CASES)
    assert result.responses == {"spider-dev-0": "B"} and result.repeated == ["id 'spider-dev-0' (line 2)"]
    warnings = match_warnings(result, len(SQL_CASES))
    assert warnings == [("1 of 3 cases predicted: the other 2 had no prediction and were scored as wrong (first: "
                         "'spider-dev-1'); --categories and --limit score only the cases a file predicts"),
                        ("1 prediction repeated a case already predicted; the later one is used "
                         "(first: id 'spider-dev-0' (line 2))")]


@pytest.mark.parametrize("text,cases,expected,got", [
    ('{"id": "q0", "response": "A"}\n', SQL_CASES, "an id such as 'spider-dev-0' (or its row index, 0)",
     "id 'q0' (line 1)"),
    ('{"prompt": "Hello", "response": "A"}\n', PROMPT_CASES, "a prompt such as 'Write a poem.'",
     "prompt 'Hello' (line 1)"),
    ("A\tz\n", SQL_CASES, "questions 0 to 2", "names database 'z', but question 0 is on 'a' (line 1)"),
    ('{"id": "x", "response": "A"}\n', PROMPT_CASES, "an id such as '1000'", "id 'x' (line 1)"),
])
def test_nothing_matching_is_refused_with_one_expected_and_one_received_key(tmp_path, text, cases, expected, got):
    file = read_prediction_file(_file(tmp_path, text))
    result = match_predictions(file, cases)
    with pytest.raises(PredictionsDoNotMatch) as err:
        require_a_match(file, result, cases, "bench", ("jsonl", "sql-lines"))
    message = str(err.value)
    assert f"expected {expected}, got {got}" in message
    assert f"detected as {file.format}" in message and "bench reads predictions as jsonl, sql-lines" in message


def test_a_partial_match_is_not_refused(tmp_path):
    file = read_prediction_file(_file(tmp_path, '{"id": "q0", "response": "A"}\n{"id": 2, "response": "B"}\n'))
    result = match_predictions(file, SQL_CASES)
    require_a_match(file, result, SQL_CASES, "bench", ("jsonl",))
    assert match_warnings(result, 3)[1] == "1 prediction matched no case (first: id 'q0' (line 1))"
    assert match_warnings(MatchResult(responses={"a": ""}), 1) == []


# -- through the runner and the command line ---------------------------------------------------------------
def test_eval_refuses_predictions_that_match_no_case(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(eval_runner, "make_evaluator", lambda name: ShoutEvaluator())
    preds = _file(tmp_path, '{"id": "0", "response": "APPLE"}\n{"id": "1", "response": "PEAR"}\n', "p.jsonl")
    assert cli.main(["eval", "shout-bench", "--predictions", preds, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "none of the 2 predictions" in err and "expected an id such as 'a', got id '0' (line 1)" in err
    assert not (tmp_path / "o" / "summary.json").exists()


def test_eval_reports_format_and_partial_matches(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(eval_runner, "make_evaluator", lambda name: ShoutEvaluator())
    preds = _file(tmp_path, '{"prompt": "pa", "response": "APPLE"}\n{"prompt": "pz", "response": "x"}\n', "p.jsonl")
    assert cli.main(["eval", "shout-bench", "--predictions", preds, "--out", str(tmp_path / "o"),
                     "--format", "jsonl"]) == 0
    out, err = capsys.readouterr()
    assert "predictions read as jsonl" in out
    assert "warning: 1 of 2 cases predicted: the other 1 had no prediction" in err and "1 prediction matched no case" in err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["predictions_format"] == "jsonl" and summary["accuracy"] == 0.5
    assert (summary["missing_predictions"], summary["unmatched_predictions"]) == (1, 1)
    assert len(summary["prediction_warnings"]) == 2


def test_eval_refuses_a_format_the_benchmark_does_not_read(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(eval_runner, "make_evaluator", lambda name: ShoutEvaluator())
    preds = _file(tmp_path, "SELECT 1\n", "p.sql")
    assert cli.main(["eval", "shout-bench", "--predictions", preds, "--out", str(tmp_path / "o")]) == 2
    assert "shout-bench does not read sql-lines predictions (detected in" in capsys.readouterr().err
    assert cli.main(["eval", "shout-bench", "--predictions", preds, "--out", str(tmp_path / "o"),
                     "--format", "nope"]) == 2
    assert "unknown predictions format 'nope'" in capsys.readouterr().err
    assert cli.main(["eval", "shout-bench", "--model", "m", "--out", str(tmp_path / "o"), "--format", "jsonl"]) == 2
    assert "--format names the format of a --predictions file" in capsys.readouterr().err


# -- mrbench score ------------------------------------------------------------------------------------------
def _score(tmp_path, monkeypatch, rows: list[dict]) -> int:
    monkeypatch.setattr(scoring, "make_task", lambda name: ShoutTask())
    data = _file(tmp_path, "".join(json.dumps(r) + "\n" for r in rows), "in.jsonl")
    return cli.main(["score", "shout", "--data", data, "--out", str(tmp_path / "o.jsonl")])


def test_score_refuses_a_file_with_nothing_to_score(tmp_path, monkeypatch, capsys):
    assert _score(tmp_path, monkeypatch, []) == 2
    assert "in.jsonl: no rows to score" in capsys.readouterr().err
    assert _score(tmp_path, monkeypatch, [{"word": "a", "response": None}, {"word": "b", "response": None}]) == 2
    err = capsys.readouterr().err
    assert "none of the 2 rows could be scored: 2 of 2 rows have a null response" in err
    assert (tmp_path / "o.jsonl").exists()  # the per-row details are still written


def test_score_warns_about_rows_it_could_not_score(tmp_path, monkeypatch, capsys):
    assert _score(tmp_path, monkeypatch, [{"word": "a", "response": "A"}, {"word": "b", "response": None}]) == 0
    out, err = capsys.readouterr()
    assert "scored 2 rows" in out and "warning: 1 of 2 rows have a null response, scored as empty (first: row 2)" in err


def test_score_counts_rewards_that_could_not_be_computed(tmp_path, capsys):
    from text2sql_fixtures import answer, make_db

    make_db(tmp_path / "spider" / "database")
    row = {"db_id": "toy", "question": "How many?", "query": "SELECT count(*) FROM emp",
           "response": answer("SELECT count(*) FROM emp")}
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(row) + "\n" + json.dumps({**row, "db_id": "gone"}) + "\n")
    argv = ["score", "text2sql", "--data", str(data), "--out", str(tmp_path / "o.jsonl"), "--data-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "1 of 2 rows have a reward that could not be computed (first: row 2: executable: " in err
    assert "database 'gone' is missing" in err
    data.write_text(json.dumps({**row, "db_id": "gone"}) + "\n")
    assert cli.main(argv) == 2
    assert "none of the 1 rows could be scored" in capsys.readouterr().err


def test_a_file_that_predicts_a_few_of_many_cases_says_how_many_first():
    """``eval bfcl-v4 --predictions`` on 8 of its 3,625 cases (newcomer review 5) says so up front."""
    from evals.prediction_match import MatchResult

    result = MatchResult(responses={f"c{i}": "x" for i in range(8)})
    result.missing = [f"m{i}" for i in range(3617)]
    assert match_warnings(result, 3625)[0].startswith("8 of 3,625 cases predicted: the other 3,617 had no prediction")
