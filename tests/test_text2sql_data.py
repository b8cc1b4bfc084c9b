"""Text-to-SQL data loading, training preparation, schemas and `mrbench score` rows."""

from __future__ import annotations

import json
import math
import os

import pytest
from text2sql_fixtures import answer, make_db

from tasks.base import DataError, Task
from tasks.data_source import load_examples
from tasks.registry import TASKS
from tasks.text2sql.schema import schema_from_database, schema_from_tables_entry
from tasks.text2sql.task import Text2SQLTask


def _data_dir() -> str:
    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data:
        pytest.skip("MRBENCH_DATA_DIR is not set (real Spider data)")
    return data


class WordTokenizer:
    """A stand-in tokenizer: one token per whitespace-separated word (no chat template)."""

    chat_template = None

    def encode(self, text: str) -> list[int]:
        return list(range(len(text.split())))


@pytest.fixture()
def toy_root(tmp_path):
    make_db(tmp_path / "spider" / "database")
    rows = [
        {"db_id": "toy", "question": "Names?", "query": "SELECT name FROM emp"},
        {"db_id": "toy", "question": "Broken?", "query": "SELECT nothing FROM nowhere"},
        {"db_id": "gone", "question": "Lost?", "query": "SELECT 1"},
        {"db_id": "toy", "question": "Ages? " + "very " * 300 + "long", "query": "SELECT age FROM emp"},
        {"db_id": "toy", "question": "Count?", "query": "SELECT count(*) FROM emp"},
    ]
    (tmp_path / "spider" / "train_spider.json").write_text(json.dumps(rows))
    (tmp_path / "spider" / "dev.json").write_text(json.dumps(rows))
    return tmp_path


def test_registered_and_zero_arg_constructible():
    task = TASKS.get("text2sql")()
    assert isinstance(task, Task) and task.name == "text2sql"
    assert [s.name for s in task.reward_specs()] == ["format", "executable", "execution"]
    assert list(task.block_order) == ["format", "executable", "execution"]


def test_no_data_dir_says_where_to_point_it():
    with pytest.raises(FileNotFoundError, match="data_dir"):
        load_examples(Text2SQLTask(), "train", None)


def test_unknown_split_lists_known_ones(toy_root):
    with pytest.raises(ValueError, match="known: .*spider-dk"):
        load_examples(Text2SQLTask(), "nope", str(toy_root))


def test_training_preparation_drops_and_reports(toy_root):
    task = Text2SQLTask(max_prompt_tokens=250, tokenizer=WordTokenizer())
    examples = load_examples(task, "train", str(toy_root))
    rep = task.last_load_report
    assert [e.meta["question"] for e in examples] == ["Names?", "Count?"]
    assert (rep["questions"], rep["kept"], rep["missing_database"], rep["reference_failed"], rep["too_long"]) == \
        (5, 2, 1, 1, 1)
    assert rep["dropped_ids"] == {"missing_database": ["spider-train-2"], "reference_failed": ["spider-train-1"],
                                  "too_long": ["spider-train-3"]}
    assert rep["token_count"] == "tokenizer"


def test_dev_keeps_every_question_and_marks_missing_databases(toy_root):
    task = Text2SQLTask()
    examples = load_examples(task, "dev", str(toy_root))
    assert len(examples) == 5 and task.last_load_report["filtered"] is False
    lost = examples[2]
    assert lost.meta["db_path"] is None and "database 'gone' is missing" in lost.meta["skip_reason"]


def test_limit_and_seed_are_deterministic(toy_root):
    task = Text2SQLTask()
    a = [e.id for e in load_examples(task, "dev", str(toy_root), limit=3, seed=1)]
    b = [e.id for e in load_examples(task, "dev", str(toy_root), limit=3, seed=1)]
    others = {tuple(e.id for e in load_examples(task, "dev", str(toy_root), limit=3, seed=s)) for s in range(2, 8)}
    assert a == b and len(a) == 3 and len(others | {tuple(a)}) > 1


def test_malformed_row_names_file_and_row(tmp_path):
    (tmp_path / "spider").mkdir()
    (tmp_path / "spider" / "dev.json").write_text(json.dumps([{"db_id": "x", "question": "q", "query": "SELECT 1"},
                                                             {"db_id": "x", "question": "q"}]))
    with pytest.raises(DataError, match=r"dev.json, row 1: missing or empty string field 'query'"):
        load_examples(Text2SQLTask(), "dev", str(tmp_path))


def test_schema_is_rendered_from_the_database(tmp_path):
    db = str(make_db(tmp_path))
    plain = schema_from_database(db)
    assert plain.index("CREATE TABLE dept") < plain.index("CREATE TABLE emp")
    assert "/*" not in plain
    sampled = schema_from_database(db, 2)
    assert "2 example rows of emp" in sampled and "Ann | 1 | 1000.5 | 30 | 10 | 5" in sampled


def test_schema_from_tables_entry():
    entry = {"table_names_original": ["a", "b c"], "column_names_original": [[-1, "*"], [0, "id"], [1, "a_id"]],
             "column_types": ["text", "number", "number"], "primary_keys": [1], "foreign_keys": [[2, 1]]}
    assert schema_from_tables_entry(entry) == (
        'CREATE TABLE a (\n  id NUMBER,\n  PRIMARY KEY (id)\n);\n\n'
        'CREATE TABLE "b c" (\n  a_id NUMBER,\n  FOREIGN KEY (a_id) REFERENCES a(id)\n);')


def test_example_from_row_scores_a_response(toy_root):
    task = Text2SQLTask()
    row = {"db_id": "toy", "question": "Names?", "query": "SELECT name FROM emp", "response": "ignored here"}
    ex = task.example_from_row(row, where="in.jsonl:1", data_dir=str(toy_root))
    assert ex.meta["db_path"].endswith(os.path.join("toy", "toy.sqlite"))
    assert [v.value for v in task.score(ex, answer("SELECT name FROM emp"))] == [1.0, 1.0, 1.0]
    # an absent database: the row is kept and reported, its SQL rewards do not apply (never right or wrong)
    gone = task.example_from_row({**row, "db_id": "gone"}, where="in.jsonl:2", data_dir=str(toy_root))
    assert gone.meta["db_path"] is None and "database 'gone' is missing" in gone.meta["skip_reason"]
    fmt, exe, res = task.score(gone, answer("SELECT name FROM emp"))
    assert fmt.value == 1.0 and math.isnan(exe.value) and math.isnan(res.value)
    assert "database 'gone' is missing" in exe.reason and exe.block is None
    # a root holding no database folder at all is a wrong --data-dir: an error naming the place
    with pytest.raises(DataError, match="in.jsonl:5: database 'toy' not found under .* none of the database folders"):
        task.example_from_row(row, where="in.jsonl:5", data_dir=str(toy_root / "spider" / "database" / "toy"))
    with pytest.raises(DataError, match="'query'"):
        task.example_from_row({"db_id": "toy", "question": "q"}, where="in.jsonl:3", data_dir=str(toy_root))
    with pytest.raises(DataError, match="--data-dir"):
        task.example_from_row(row, where="in.jsonl:4", data_dir=None)


def test_real_spider_training_preparation():
    """The paper drops 3 training questions whose reference fails; this copy also lacks two databases."""
    task = Text2SQLTask()
    examples = load_examples(task, "train", _data_dir())
    rep = task.last_load_report
    print(f"\nspider train: {rep['questions']} questions, kept {rep['kept']}; dropped {rep['missing_database']} "
          f"(missing database), {rep['reference_failed']} (reference fails), {rep['too_long']} (prompt > "
          f"{rep['max_prompt_tokens']} tokens, {rep['token_count']})")
    assert rep["questions"] == 7000 and rep["reference_failed"] == 3
    assert rep["kept"] + rep["missing_database"] + rep["reference_failed"] + rep["too_long"] == 7000
    assert len(examples) == rep["kept"]
    assert all(e.meta["db_path"] for e in examples)


def test_real_dev_example_holds_what_the_verifier_needs():
    task = Text2SQLTask()
    ex = load_examples(task, "dev", _data_dir(), limit=1, seed=0)[0]
    for key in ("db_path", "query", "db_id", "question"):
        assert ex.meta[key]
    assert ex.messages[0]["role"] == "system" and "<think>" in ex.messages[0]["content"]
    assert ex.meta["question"] in ex.messages[1]["content"]
    assert [v.value for v in task.score(ex, answer(ex.meta["query"]))] == [1.0, 1.0, 1.0]


@pytest.mark.slow
def test_token_counts_with_a_real_tokenizer_match_the_approximation():
    """The embedded SmolLM2 tokenizer (chat template) against ceil(chars / 3) on 200 training prompts."""
    data = _data_dir()
    from harness.models import ModelError, smollm2_gguf_path

    try:
        gguf = smollm2_gguf_path()
    except ModelError as exc:
        pytest.skip(str(exc))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    exact = Text2SQLTask(tokenizer=tok)
    examples = load_examples(exact, "train", data, limit=200, seed=0)
    assert exact.last_load_report["token_count"] == "tokenizer"
    approx = Text2SQLTask()
    ratios = [approx.count_tokens(e.messages) / exact.count_tokens(e.messages) for e in examples]
    mean = sum(ratios) / len(ratios)
    print(f"\napprox / exact token count over {len(ratios)} prompts: mean {mean:.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}")
    assert 0.8 < mean < 1.25


def test_hub_dataset_rows_use_local_databases(toy_root, monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load_dataset(repo, split):
        calls.append((repo, split))
        return [{"db_id": "toy", "question": "Names?", "query": "SELECT name FROM emp"},
                {"db_id": "gone", "question": "Lost?", "query": "SELECT 1"}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    task = Text2SQLTask(database_dir=str(toy_root))
    examples = load_examples(task, "train", "hub:someone/spider")
    assert calls == [("someone/spider", "train")]
    assert [e.meta["db_id"] for e in examples] == ["toy"]  # a train split is filtered
    assert task.last_load_report["missing_database"] == 1
    dev = load_examples(task, "train", "hub:someone/spider:validation")
    assert calls[-1] == ("someone/spider", "validation") and len(dev) == 2
    assert "hub datasets carry no databases" in dev[1].meta["skip_reason"]
    assert [v.value for v in task.score(examples[0], answer("SELECT name FROM emp"))] == [1.0, 1.0, 1.0]
