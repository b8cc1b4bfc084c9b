"""mrbench_integrations' reward functions, called as TRL calls them (no trainer here; the
GRPOTrainer runs are in test_trl_grpo.py): reward keys, examples that survive JSON, hostile
completions scored as ``mrbench score`` scores them without changing a database, and a verifier
that raises or stalls giving the failure value with a reason instead of an exception."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

import pytest
from text2sql_fixtures import answer, make_db

from harness import cli
from mrbench_integrations.task_rewards import (
    CompletionScorer,
    completion_text,
    decode_example,
    encode_example,
    reward_keys,
)
from mrbench_integrations.trl import EXAMPLE_COLUMN, FAILURE_COLUMN, reward_functions
from tasks.base import Example, Task, Verdict
from tasks.data_source import load_examples
from tasks.registry import make_task
from tasks.text2sql.sandbox import file_checksum

MIB = 1 << 20


def call_as_trl(funcs: list, examples: list[Example], texts: list[str], **extra: Any) -> list[list[float | None]]:
    """Each function called as GRPOTrainer calls it: keyword arguments, chat completions, every
    dataset column; the result per completion, by function."""
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    columns = {EXAMPLE_COLUMN: [encode_example(e) for e in examples], "mrbench_id": [e.id for e in examples], **extra}
    outputs = [f(prompts=[e.messages for e in examples], completions=completions, completion_ids=None, **columns)
               for f in funcs]
    return [list(row) for row in zip(*outputs)]


def test_reward_keys_name_each_reward_by_its_family_and_occurrence():
    task = make_task("ifollow")
    example = task.example_from_row({"key": "k", "prompt": "Write.", "instruction_id_list": [
        "length_constraints:number_words", "punctuation:no_comma", "length_constraints:number_words"], "kwargs": [
        {"num_words": 5, "relation": "at least"}, {}, {"num_words": 50, "relation": "less than"}]})
    assert reward_keys(task, example) == ["length_constraints:number_words", "punctuation:no_comma",
                                          "length_constraints:number_words#2"]
    sql = make_task("text2sql")
    assert reward_keys(sql, Example("q", [], ["format", "executable", "execution"])) == [
        "format", "executable", "execution"]
    funcs = reward_functions(task, [example])
    assert [f.__name__ for f in funcs] == reward_keys(task, example)  # what TRL logs as rewards/{name}/mean


@pytest.mark.parametrize("completion, text", [
    ("plain", "plain"),
    ([{"role": "assistant", "content": "chat"}], "chat"),
    ([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "ab"),
    (None, ""),
    ([{"role": "assistant", "content": None}], ""),
])
def test_completion_text(completion, text):
    assert completion_text(completion) == text


def test_examples_score_the_same_after_their_json_trip():
    task = make_task("ifollow")
    responses = ["hello world", "A, B. C!\n\nP.S. done", '"<<Title>>\n*one* [two]."', ""]
    for example in load_examples(task, "train", None, 40, 3):
        again = decode_example(encode_example(example))
        assert again == example
        for response in responses:
            assert [(v.value, v.reason) for v in task.score(again, response)] == [
                (v.value, v.reason) for v in task.score(example, response)]
    with pytest.raises(ValueError, match="not an mrbench example"):
        decode_example('{"id": 1}')


def test_hostile_sql_completions_score_as_mrbench_score_and_change_no_database(tmp_path):
    db = make_db(tmp_path / "database")
    before, listing = file_checksum(str(db)), sorted(os.listdir(db.parent))
    hostile = {
        "1 MiB of text": "x" * MIB,
        "a 1 MiB query": answer("SELECT name FROM emp WHERE name = '" + "y" * MIB + "'"),
        "a lone surrogate": answer("SELECT name FROM emp WHERE name = '\ud800'"),
        "drop table": answer("DROP TABLE emp"),
        "insert": answer("INSERT INTO emp (id, name) VALUES (99, 'x')"),
        "update": answer("UPDATE emp SET age = 0"),
        "attach and write": answer(f"ATTACH DATABASE '{tmp_path / 'x.db'}' AS o"),
    }
    row = {"id": "q", "db_id": "toy", "question": "The names of the employees?", "query": "SELECT name FROM emp"}
    task = make_task("text2sql")
    example = task.example_from_row(row, data_dir=str(tmp_path))
    funcs = reward_functions(task, [example])
    got = call_as_trl(funcs, [example] * len(hostile), list(hostile.values()))
    rows = [dict(row, id=name, response=text) for name, text in hostile.items()]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli.main(["score", "text2sql", "--data", str(tmp_path / "rows.jsonl"), "--out", str(tmp_path / "s.jsonl"),
                     "--data-dir", str(tmp_path)]) == 0
    scored = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    for name, values, by_mrbench in zip(hostile, got, scored):
        assert values == [by_mrbench["rewards"][f.__name__] for f in funcs], name
        assert by_mrbench["rewards"]["execution"] == 0.0 and by_mrbench["details"]["execution"]["reason"], name
        assert by_mrbench["rewards"]["executable"] == 0.0 and by_mrbench["details"]["executable"]["reason"], name
    assert file_checksum(str(db)) == before and sorted(os.listdir(db.parent)) == listing
    assert not (tmp_path / "x.db").exists()


def test_hostile_ifollow_completions_score_as_mrbench_score(tmp_path):
    row = {"key": "k", "prompt": "Write a note. Do not use any commas. Answer in lowercase letters only.",
           "instruction_id_list": ["punctuation:no_comma", "change_case:english_lowercase",
                                   "detectable_content:postscript"],
           "kwargs": [{}, {}, {"postscript_marker": "P.S."}]}
    hostile = {"1 MiB, commas": "a, " * (MIB // 3), "a lone surrogate": "\ud800 P.S. Hi, there",
               "a lone low surrogate in lowercase": "abc \udfff def"}
    task = make_task("ifollow")
    example = task.example_from_row(row)
    funcs = reward_functions(task, [example])
    got = call_as_trl(funcs, [example] * len(hostile), list(hostile.values()))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(dict(row, key=n, response=t)) + "\n"
                                                 for n, t in hostile.items()))
    assert cli.main(["score", "ifollow", "--data", str(tmp_path / "rows.jsonl"),
                     "--out", str(tmp_path / "s.jsonl")]) == 0
    scored = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    for name, values, by_mrbench in zip(hostile, got, scored):
        assert values == [by_mrbench["rewards"][n] for n in by_mrbench["reward_names"]], name
        assert all(d["reason"] for n, d in by_mrbench["details"].items() if by_mrbench["rewards"][n] == 0.0), name
    assert got[0][0] == 0.0 and got[1][0] == 0.0  # the commas fail no_comma


class StubTask(Task):
    """Three rewards; its verifier passes, raises or stalls, and counts its calls."""

    name = "stub"
    format_reward = None

    def __init__(self, behaviour: str = "pass") -> None:
        self.behaviour = behaviour
        self.calls = 0

    def load(self, split: str = "train", data_dir: str | None = None) -> list[Example]:
        return [Example(f"s{i}", [{"role": "user", "content": f"prompt {i}"}], ["a", "b", "c"]) for i in range(2)]

    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None) -> Example:
        raise NotImplementedError

    def reward_range(self, name: str) -> tuple[float, float]:
        return 0.0, 1.0

    def score(self, example: Example, response: str) -> list[Verdict]:
        self.calls += 1
        if self.behaviour == "raise":
            raise RuntimeError("a checker bug")
        if self.behaviour == "stall":
            time.sleep(3600)  # only the time budget ends it
        return [Verdict(n, 1.0 if n != "c" else float("nan"), "ok") for n in example.reward_names]


@pytest.mark.parametrize("behaviour, reason", [("raise", "verifier error: RuntimeError: a checker bug"),
                                               ("stall", "timeout")])
def test_a_verifier_that_raises_or_stalls_scores_the_failure_value_with_a_reason(behaviour, reason, caplog):
    task = StubTask(behaviour)
    examples = task.load()
    funcs = reward_functions(task, examples, time_budget_s=0.5)
    logged: dict[str, list] = {}
    with caplog.at_level(logging.WARNING, logger="mrbench_integrations"):
        got = call_as_trl(funcs, examples, ["r1", "r2"], log_extra=lambda column, values: logged.setdefault(
            column, []).extend(values))
    assert got == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert logged == {FAILURE_COLUMN: [reason, reason]}  # TRL's completions table gets the reason
    assert sum(reason.split(":")[0] in r.getMessage() or "budget" in r.getMessage() for r in caplog.records) == 2
    scored = CompletionScorer(task, 0.5).score(examples[0], "r")
    assert scored.failure == reason and set(scored.reasons.values()) == {reason}


def test_the_verifiers_run_once_per_completion_for_all_the_functions():
    task = StubTask()
    examples = task.load()
    funcs = reward_functions(task, examples, time_budget_s=None)  # scored here, where the calls are counted
    assert [f.__name__ for f in funcs] == ["a", "b", "c"]
    assert call_as_trl(funcs, examples, ["r1", "r2"]) == [[1.0, 1.0, None], [1.0, 1.0, None]]  # NaN -> None
    assert task.calls == 2
    call_as_trl(funcs, examples, ["r3", "r2"])  # the next batch
    assert task.calls == 4
    logged: list = []
    call_as_trl(funcs, examples, ["r3", "r2"], log_extra=lambda column, values: logged.append(values))
    assert task.calls == 6 and logged == [["", ""]]  # an equal next batch is scored and logged once again


def test_a_batch_without_the_example_column_is_one_clear_error():
    task = StubTask()
    (f, *_) = reward_functions(task, task.load())
    with pytest.raises(ValueError, match="the batch has no 'mrbench_example' column"):
        f(prompts=["p"], completions=["c"], answer=["x"])
