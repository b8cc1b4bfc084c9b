"""Text no tokenizer can take, and a db_id that is a path, are refused at data load naming the file
and the row (reliability probe 4, B5 and S3b). A lone surrogate (``\\ud800``, a legal JSON escape)
in a training prompt used to crash the run inside the tokenizer, after the model loaded, with a
``TypeError`` naming neither; it is refused (not replaced) before any step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from mrbench_core.errors import DataError
from mrbench_core.text_check import check_examples, check_text, lone_surrogate
from tasks.base import Example
from tasks.ifollow.rows import prompt_of
from tasks.text2sql.data import database_path, load_records
from tasks.toolcall import demo


def test_lone_surrogates_are_found_and_real_text_is_not():
    assert lone_surrogate("ok \ud800 x") == 3 and lone_surrogate("\udfff") == 0
    assert lone_surrogate("emoji \U0001f600, NUL \x00, RTL \u202e, BOM \ufeff") is None
    with pytest.raises(DataError, match=r"f\.jsonl, row 4: prompt\[1\]\.content holds a lone surrogate U\+D800 "
                                        r"at character 2"):
        check_text([{"content": "ok"}, {"content": "a \ud800"}], "prompt", path="f.jsonl", row=4)


@pytest.mark.usefixtures("one_torch_thread")
def test_the_probe_run_with_a_surrogate_in_a_toolcall_prompt_is_one_line(tmp_path, capsys):
    demo.write_jsonl(str(tmp_path / "d.jsonl"), "test", "reference")
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("response", None)
    rows[1]["prompt"][-1]["content"] += " \ud800"
    data = tmp_path / "sur.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = cli.main(["run", "--task", "toolcall", "--algo", "grpo", "--model", "tiny-random", "--schedule.steps", "1",
                     "--task.data_dir", str(data), "--schedule.eval_limit", "2", "--output.dir", str(tmp_path / "rec")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "TypeError" not in err, err
    (line,) = [x for x in err.splitlines() if "lone surrogate" in x]
    assert f"{data}, row 1: messages[" in line and "U+D800" in line
    prov = json.loads((tmp_path / "rec" / "provenance.json").read_text())
    assert prov["status"] == "failed" and "lone surrogate" in prov["failure"]


def test_an_ifollow_prompt_with_a_surrogate_is_refused_by_row():
    with pytest.raises(DataError, match=r"x\.jsonl, row 7: prompt holds a lone surrogate"):
        prompt_of({"prompt": "write \ud83d"}, path="x.jsonl", row_no=7)
    with pytest.raises(DataError, match=r"messages\[0\]\.content holds"):
        prompt_of({"messages": [{"role": "user", "content": "\udc00"}]}, path="x.jsonl", row_no=1)


def _spider(tmp_path: Path, rows: list[dict]) -> str:
    (tmp_path / "spider").mkdir()
    (tmp_path / "spider" / "dev.json").write_text(json.dumps(rows))
    return str(tmp_path)


@pytest.mark.parametrize("db_id", ["../x", "/abs", "..", "a/b", "a\\b"])
def test_a_db_id_that_is_a_path_is_refused_by_file_and_row(tmp_path, db_id):
    data = _spider(tmp_path, [{"db_id": "toy", "question": "q", "query": "SELECT 1"},
                              {"db_id": db_id, "question": "q", "query": "SELECT 1"}])
    with pytest.raises(DataError, match=rf"dev\.json, row 1: db_id .* is not a folder name"):
        load_records("spider-dev", data)
    assert database_path([str(tmp_path / "spider" / "database")], db_id) is None


def test_a_text2sql_question_with_a_surrogate_is_refused(tmp_path):
    data = _spider(tmp_path, [{"db_id": "toy", "question": "how many \ud800", "query": "SELECT 1"}])
    with pytest.raises(DataError, match=r"dev\.json, row 0: question/evidence\[0\] holds a lone surrogate"):
        load_records("spider-dev", data)


def test_a_plugin_task_example_is_checked_too():
    bad = Example(id="e3", messages=[{"role": "user", "content": "x \udfff"}], reward_names=[])
    with pytest.raises(DataError, match=r"data\.jsonl, row example 'e3': messages\[0\] holds a lone surrogate"):
        check_examples([bad], "data.jsonl")


def test_openrlhf_refuses_a_plugin_tasks_surrogate_by_row_before_it_launches(tmp_path, monkeypatch):
    """The shared prologue (Step.open) checks the data on every backend: openrlhf too, before it
    writes a prompt file or launches anything."""
    from algorithms import get_algorithm
    from harness.backends.openrlhf import backend as openrlhf
    from harness.backends.openrlhf.cell import CellPaths
    from harness.config import resolve
    from harness.models import byte_tokenizer
    from harness.records import RunRecord
    from tasks.registry import make_task

    launched = []
    monkeypatch.setattr(openrlhf, "load_tokenizer", lambda source: byte_tokenizer())
    monkeypatch.setattr(openrlhf, "run_process", lambda *a, **k: launched.append(a))
    task = make_task("toolcall")
    bad = Example(id="e3", messages=[{"role": "user", "content": "x \udfff"}], reward_names=["format"])
    monkeypatch.setattr(task, "load", lambda split, data_dir: [bad])
    cfg = resolve(None, [("backend", "openrlhf"), ("task", "toolcall"), ("algo", "grpo"), ("model", "tiny-random"),
                         ("output.dir", str(tmp_path / "rec"))])
    record = RunRecord.open(cfg)
    try:
        with pytest.raises(DataError, match=r"the task's data, row example 'e3': messages\[0\] holds a lone surrogate"):
            openrlhf.OpenRLHFBackend(cfg, task, get_algorithm("grpo")).train(record)
    finally:
        record.unlock()
    assert not launched and not CellPaths(tmp_path / "rec").prompts.exists()
