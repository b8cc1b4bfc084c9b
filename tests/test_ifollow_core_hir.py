"""HIR-16K: type2 check tables, the JSONL loader, its errors, and the hub error path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.base import DataError
from tasks.ifollow.constraints import check, family_ids
from tasks.ifollow.hir import load_hub, load_local, row_type
from tasks.ifollow.task import InstructionFollowingTask

T, F = True, False
TABLE: dict[str, list[tuple[str, dict, bool, bool]]] = {
    "hir:quotation_count": [
        ('He said "hi" and "bye".', {"min_quotes": 2}, T, T),
        ('He said "hi".', {"min_quotes": 2}, F, F),
        ("“Curly quotes” count.", {"min_quotes": 1}, T, T),
        ('Empty "" does not.', {"min_quotes": 1}, F, F),
    ],
    "hir:sentence_balance": [
        ("One two three. Four five six.", {"max_ratio": 1}, T, T),
        ("Short. This sentence has many more words in it.", {"max_ratio": 2}, F, F),
        ("Only one sentence here.", {"max_ratio": 3}, F, F),
        ("Wörd één. Twee drie.", {"max_ratio": 1}, T, T),
    ],
    "hir:max_sentence_words": [
        ("Short one. Another short.", {"max_words": 3}, T, T),
        ("This sentence has five words.", {"max_words": 4}, F, F),
        ("Intro line without a period that is rather long\nOk.", {"max_words": 3}, F, T),
    ],
    "hir:no_repeated_sentence": [
        ("A cat. A dog.", {}, T, T),
        ("A cat. a  CAT.", {}, F, F),
        ("Same.", {}, T, T),
    ],
    "hir:starts_with": [
        ("  Dear friend, hello", {"phrase": "dear friend"}, T, T),
        ("Hello dear friend", {"phrase": "dear friend"}, F, F),
        ("Sure!\nDear friend", {"phrase": "Dear friend"}, F, T),
    ],
    "hir:ends_with_question": [
        ("Is it? ", {}, T, T),
        ("It is.", {}, F, F),
        ("Is it?\n---", {}, F, T),
    ],
    "hir:max_characters": [
        ("abc", {"max_chars": 3}, T, T),
        ("abcd", {"max_chars": 3}, F, F),
        ("  ünï  \n", {"max_chars": 3}, T, T),
    ],
    "hir:numbered_list": [
        ("1. a\n2. b", {"num_items": 2}, T, T),
        ("1) a\n2) b\n3) c", {"num_items": 2}, F, T),  # loose: first line dropped
        ("1.a\n2.b", {"num_items": 2}, F, F),
    ],
}


def test_table_covers_every_hir_id() -> None:
    assert sorted(TABLE) == family_ids("hir")


@pytest.mark.parametrize("cid,response,kwargs,strict,loose", [(c, *r) for c, rows in TABLE.items() for r in rows])
def test_hir_checker_table(cid: str, response: str, kwargs: dict, strict: bool, loose: bool) -> None:
    assert check(cid, response, kwargs).ok is strict
    assert check(cid, response, kwargs, loose=True).ok is loose
    assert not check(cid, "  \n", kwargs).ok


ROWS = [
    {"key": "a", "type": "type1", "prompt": "Describe tea. Do not use commas.",
     "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
    {"id": "b", "prompt": "Tell a joke. End with a question.", "checks": [["hir:ends_with_question", {}]],
     "base": "Tell a joke.", "constraint_texts": ["End with a question."]},
    {"id": "c", "type": "type3", "prompt": "Judge me", "rubrics": ["be nice"]},
    {"id": "d", "subset": 2, "prompt": "Quote twice.", "constraints": [{"id": "hir:quotation_count",
                                                                        "kwargs": {"min_quotes": 2}}]},
]


def _write(tmp_path: Path, rows: list, name: str = "hir.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_row_types() -> None:
    assert [row_type(r) for r in ROWS] == ["type1", "type2", "type3", "type2"]


def test_local_loader_reads_type1_and_type2_skips_judged(tmp_path: Path) -> None:
    _write(tmp_path, ROWS)
    items = load_local(tmp_path)
    assert [i.id for i in items] == ["hir-a", "hir-b", "hir-d"]
    assert items[0].constraints == [("punctuation:no_comma", {})]
    assert items[2].constraints == [("hir:quotation_count", {"min_quotes": 2})]
    assert len(load_local(tmp_path, limit=2)) == 2


def test_task_loads_hir_and_removes_known_constraint_text(tmp_path: Path) -> None:
    _write(tmp_path, ROWS)
    task = InstructionFollowingTask()
    examples = task.load(data_dir=str(tmp_path))
    assert [e.reward_names for e in examples] == [["c0:punctuation:no_comma"], ["c0:hir:ends_with_question"],
                                                 ["c0:hir:quotation_count"]]
    ex = examples[1]
    verdicts = task.score(ex, "Why did it? Because.")
    assert [v.value for v in verdicts] == [0.0]
    ctx = task.replay_contexts(ex, verdicts, [0])
    assert ctx.all[0]["content"] == "Tell a joke. End with a question."
    assert ctx.without[0][0]["content"] == "Tell a joke."
    assert task.without_rubric(ex)[0]["content"] == "Tell a joke."


@pytest.mark.parametrize("bad,match", [
    ('{"prompt": "x", "instruction_id_list": ["nope:id"], "kwargs": [{}]}', r"row 2: unknown constraint id 'nope:id'"),
    ('{"prompt": "x", "checks": []}', r"row 2: .*checks"),
    ("{not json", r"row 2: not valid JSON"),
    ('{"checks": [["hir:starts_with", {"phrase": "a"}]]}', r"row 2: row has no 'prompt'"),
    ('{"prompt": "x", "checks": [["hir:starts_with", {"phrase": "a"}]], "constraint_texts": ["a", "b"]}',
     "one text per constraint"),
])
def test_loader_errors_name_file_and_row(tmp_path: Path, bad: str, match: str) -> None:
    path = _write(tmp_path, [ROWS[0], bad])
    with pytest.raises(DataError, match=match) as err:
        load_local(path)
    assert str(path) in str(err.value)


def test_missing_folder_is_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_local(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match=r"no \*\.jsonl"):
        load_local(tmp_path)


def test_hub_error_path_is_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    def refuse(*args, **kwargs):
        raise ConnectionError("no network here")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(RuntimeError, match=r"sastpg/HIR-16K.*no network here.*--data-dir"):
        load_hub()
    with pytest.raises(RuntimeError, match="--data-dir"):
        InstructionFollowingTask().load(data_dir="hub:sastpg/HIR-16K")
