"""One data contract for every task (tasks/data_source.py): the hub is named once, in
``data_dir``; ``limit`` is a seeded sample kept in file order; generated data draws named streams."""

from __future__ import annotations

import json

import pytest

from mrbench_core.errors import DataError
from tasks.data_source import HubSource, check_split, hub_source, sample_indices, seeded_order, seeded_sample

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

    full = [e.id for e in ToolCallTask().load("train")]
    part = [e.id for e in ToolCallTask().load("train", limit=7, seed=2)]
    assert len(part) == 7 and part == [i for i in full if i in set(part)]

    from test_ifollow_core_hir import VARIANTS, hir_row

    q_type = min(VARIANTS)
    path = tmp_path / "hir.jsonl"
    path.write_text("".join(json.dumps(hir_row(q_type, key=f"r{i}")) + "\n" for i in range(30)))
    task = InstructionFollowingTask()
    everything = [e.id for e in task.load(data_dir=str(path))]
    some = [e.id for e in task.load(data_dir=str(path), limit=5, seed=1)]
    assert len(some) == 5 and some == [i for i in everything if i in set(some)]
    assert some != [e.id for e in task.load(data_dir=str(path), limit=5, seed=2)]
