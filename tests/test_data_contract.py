"""One data contract for every task (tasks/data_source.py): the hub is named once, in
``data_dir``, and read by one reader; ``limit`` is the harness's seeded sample kept in file order,
applied after ``Task.load``; generated data draws named streams."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from mrbench_core.errors import DataError
from tasks.data_source import (
    Generated,
    HubSource,
    Screened,
    check_split,
    hub_source,
    load_examples,
    read_hub,
    sample_indices,
    seeded_order,
    seeded_sample,
    take,
)

pytestmark = pytest.mark.torchfree


@pytest.mark.parametrize("data_dir, split, expected", [
    (None, "train", None), ("data/toolrl", "train", None), ("hub:a/b", "test", HubSource("a/b", "test")),
    ("hub:a/b:validation", "train", HubSource("a/b", "validation")),
])
def test_one_hub_spelling(data_dir, split, expected):
    assert hub_source(data_dir, split) == expected


@pytest.mark.parametrize("bad, message", [("hf:a/b", "e.g. hub:a/b"), ("hf://a/b", "e.g. hub:a/b"),
                                          ("hub:", "names no dataset")])
def test_other_spellings_are_refused_with_the_accepted_one(bad, message):
    with pytest.raises(DataError, match=message):
        hub_source(bad, "train")


def test_a_hub_name_in_split_is_refused():
    with pytest.raises(DataError, match="goes in task.data_dir"):
        check_split("hf:xlangai/spider:train")
    check_split("train")


def test_limit_is_a_seeded_sample_in_file_order():
    items = list(range(100))
    a = seeded_sample(items, 10, seed=3)
    assert a == sorted(a) and len(set(a)) == 10  # file order
    assert a == seeded_sample(items, 10, seed=3) and a != seeded_sample(items, 10, seed=4)
    assert seeded_sample(items, None, 3) == items and seeded_sample(items, 500, 3) == items
    assert sample_indices(5, 0, 1) == []
    assert sorted(seeded_order(20, 7)) == list(range(20)) and seeded_order(20, 7) == seeded_order(20, 7)


def test_every_task_keeps_file_order_under_limit(tmp_path):
    from tasks.ifollow.task import InstructionFollowingTask
    from tasks.toolcall.task import ToolCallTask

    full = [e.id for e in load_examples(ToolCallTask(), "train")]
    part = [e.id for e in load_examples(ToolCallTask(), "train", limit=7, seed=2)]
    assert len(part) == 7 and part == [i for i in full if i in set(part)]

    from test_ifollow_core_hir import VARIANTS, hir_row

    q_type = min(VARIANTS)
    path = tmp_path / "hir.jsonl"
    path.write_text("".join(json.dumps(hir_row(q_type, key=f"r{i}")) + "\n" for i in range(30)))
    task = InstructionFollowingTask()
    everything = [e.id for e in load_examples(task, data_dir=str(path))]
    some = [e.id for e in load_examples(task, data_dir=str(path), limit=5, seed=1)]
    assert len(some) == 5 and some == [i for i in everything if i in set(some)]
    assert some != [e.id for e in load_examples(task, data_dir=str(path), limit=5, seed=2)]


def test_the_one_hub_reader_reads_rows_and_names_the_real_setting(monkeypatch):
    import sys

    datasets = pytest.importorskip("datasets")
    calls = []

    def fake(repo, split):
        calls.append((repo, split))
        return iter([{"a": 1}, {"a": 2}])

    monkeypatch.setattr(datasets, "load_dataset", fake)
    assert read_hub(HubSource("o/n", "dev")) == [{"a": 1}, {"a": 2}] and calls == [("o/n", "dev")]

    def offline(repo, split):
        raise ConnectionError("no network here")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"^hub:o/n:dev: could not load it from the hub \(ConnectionError: no network "
                                        r"here\).*--task\.data_dir PATH") as err:
        read_hub(HubSource("o/n", "dev"))
    assert "--data-dir" not in str(err.value)
    monkeypatch.setitem(sys.modules, "datasets", None)  # the package is not installed
    with pytest.raises(DataError, match=r"hub:o/n:dev: .*needs the 'datasets' package.*--task\.data_dir PATH"):
        read_hub(HubSource("o/n", "dev"))


def test_every_hub_failure_is_the_same_error_for_every_task(monkeypatch):
    """ifollow, toolcall and text2sql read the hub through the one reader: one error type, one message."""
    import sys

    from tasks.registry import TASKS

    monkeypatch.setitem(sys.modules, "datasets", None)
    for name in ("ifollow", "toolcall", "text2sql"):
        with pytest.raises(DataError, match=r"^hub:o/n:train: reading a hub dataset needs the 'datasets' package"):
            load_examples(TASKS.get(name)(), "train", "hub:o/n")


# ---------------------------------------------------------------------------------------------
# the harness's `limit` keeps the very examples each task's own `limit` kept before it moved
# (recorded with the loaders of the commit before the move, on the benchmark data): every recorded
# result trained on these rows

KEPT_BEFORE = {
    ("toolcall", "train", "data", 5, 0): ["row-50", "row-138", "row-330", "row-333", "row-391"],
    ("toolcall", "train", "data", 12, 3): ["row-53", "row-58", "row-61", "row-65", "row-87", "row-111", "row-122",
                                           "row-177", "row-178", "row-206", "row-339", "row-389"],
    ("toolcall", "test", "data", 5, 1): ["28", "36", "48", "72", "74"],
    ("toolcall", "train", "built-in", 5, 0): ["demo-0022", "demo-0060", "demo-0158", "demo-0194", "demo-0283"],
    ("toolcall", "train", "built-in", 5, 1): ["demo-0134", "demo-0177", "demo-0222", "demo-0340", "demo-0348"],
    ("text2sql", "train", "data", 5, 0): ["spider-train-945", "spider-train-995", "spider-train-2003",
                                          "spider-train-4913", "spider-train-6397"],
    ("text2sql", "train", "data", 12, 3): ["spider-train-78", "spider-train-327", "spider-train-918",
                                           "spider-train-1922", "spider-train-2329", "spider-train-2703",
                                           "spider-train-2714", "spider-train-3765", "spider-train-3808",
                                           "spider-train-5030", "spider-train-6165", "spider-train-6406"],
    ("text2sql", "dev", "data", 5, 1): ["spider-dev-384", "spider-dev-494", "spider-dev-603", "spider-dev-606",
                                        "spider-dev-681"],
    ("ifollow", "train", "built-in", 5, 1): [f"gen-train-prompts-1-{i}" for i in range(5)],
    ("ifollow", "test", "built-in", 12, 3): [f"gen-heldout-prompts-3-{i}" for i in range(12)],
}
#: the generated prompts' text (their ids only count), sha256 of the prompts joined by newlines
PROMPTS_BEFORE = {("train", 5, 0): "97c0c1f230ab8b68", ("train", 12, 3): "a5c4bffd36841fde",
                  ("test", 5, 0): "f27f4001379b6999", ("test", 12, 3): "1e340153fc15f4f7"}
#: (split, data, seed) -> (how many examples without a limit, sha256 of their ids as JSON)
ALL_BEFORE = {("toolcall", "train", "data"): (400, "b26d549ba006c5a1"),
              ("toolcall", "test", "data"): (80, "2edebb7c9a5a2325"),
              ("toolcall", "train", "built-in"): (310, "52993fae5a9aa930"),
              ("text2sql", "dev", "data"): (1034, "0871fcb12ca87655"),
              ("ifollow", "train", "built-in"): (2000, "f400e4961c087ef0")}


def _data(where: str, name: str = "") -> str | None:
    if where == "built-in":
        return None
    if name == "toolcall":  # ToolRL's files are parquet: pandas reads them (not in the torch-free floor)
        pytest.importorskip("pandas")
    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data:
        pytest.skip("MRBENCH_DATA_DIR is not set (the benchmark data)")
    return data


@pytest.mark.parametrize(("name", "split", "where", "limit", "seed"), sorted(KEPT_BEFORE))
def test_the_harness_limit_keeps_the_rows_each_task_kept_before(name, split, where, limit, seed):
    from tasks.registry import TASKS

    examples = load_examples(TASKS.get(name)(), split, _data(where, name), limit, seed)
    assert [e.id for e in examples] == KEPT_BEFORE[name, split, where, limit, seed]


@pytest.mark.parametrize(("split", "limit", "seed"), sorted(PROMPTS_BEFORE))
def test_the_generated_prompts_are_those_made_before(split, limit, seed):
    from tasks.ifollow.task import InstructionFollowingTask

    examples = load_examples(InstructionFollowingTask(), split, None, limit, seed)
    text = "\n".join(e.messages[0]["content"] for e in examples)
    assert hashlib.sha256(text.encode()).hexdigest()[:16] == PROMPTS_BEFORE[split, limit, seed]


@pytest.mark.parametrize(("name", "split", "where"), sorted(ALL_BEFORE))
def test_without_a_limit_every_row_is_kept_as_before(name, split, where):
    from tasks.registry import TASKS

    ids = [e.id for e in load_examples(TASKS.get(name)(), split, _data(where, name), None, 0)]
    assert (len(ids), hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]) == ALL_BEFORE[name, split, where]


def test_the_plugin_examples_limit_keeps_the_rows_it_kept_before(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "docs" / "examples"))
    from mrbench_plugin_example.task import EchoTask

    assert [e.id for e in load_examples(EchoTask(), "train", None, 3, 0)] == ["train-0", "train-2", "train-5"]
    assert [e.id for e in load_examples(EchoTask(), "train", None, 3, 5)] == ["train-2", "train-3", "train-5"]


@pytest.mark.parametrize("name", ["ifollow", "toolcall", "text2sql"])
def test_a_hub_name_in_the_split_is_refused_for_every_task(name):
    from tasks.registry import TASKS

    with pytest.raises(DataError, match=r"task.split 'hub:o/n': a hub dataset goes in task.data_dir"):
        load_examples(TASKS.get(name)(), "hub:o/n", None)


def test_a_screened_pool_checks_only_the_rows_the_sample_visits():
    rows = list(range(40))
    checked: list[int] = []

    def keep(row: int) -> bool:
        checked.append(row)
        return row % 3 != 0  # a third of the rows fail the check

    heard: list[list[str]] = []
    kept = take(Screened(rows, keep, str, heard.append), 5, seed=4)
    walk = seeded_order(40, 4)
    visited = walk[:len(checked)]
    assert checked == visited and len(checked) < 40  # walked in the stream's order, stopped at 5
    assert kept == [str(i) for i in sorted(i for i in visited if i % 3)] and len(kept) == 5  # file order
    assert heard == [kept]
    checked.clear()
    assert take(Screened(rows, keep, str), None, seed=4) == [str(i) for i in rows if i % 3] and checked == rows


def test_a_generated_pool_makes_limit_prompts_a_prefix_of_its_stream():
    pool = Generated(lambda i, seed: (seed, i), default_size=3)
    assert take(pool, None, 7) == [(7, 0), (7, 1), (7, 2)]
    assert take(pool, 5, 7)[:2] == take(pool, 2, 7) == [(7, 0), (7, 1)]
