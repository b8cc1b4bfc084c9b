"""ToolCallTask: demo set, ToolRL loaders, row formats, blocks, replay contexts, teacher context, hub errors."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from tasks.base import DataError, Task
from tasks.data_source import load_examples
from tasks.registry import TASKS
from tasks.toolcall import demo, templates
from tasks.toolcall.demo_tools import TOOLS
from tasks.toolcall.parsing import find_call_block, parse_tool_list
from tasks.toolcall.task import ToolCallTask

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)

DATA = os.environ.get("MRBENCH_DATA_DIR")
needs_data = pytest.mark.skipif(not DATA, reason="MRBENCH_DATA_DIR is not set: the ToolRL files are needed")
TASK = ToolCallTask()


def test_registered_under_its_name_and_zero_arg_constructible():
    task = TASKS.get("toolcall")()
    assert isinstance(task, Task) and task.name == "toolcall"
    assert [s.name for s in task.reward_specs()] == ["format", "correctness"]
    assert list(task.block_order) == ["correctness", "format"]


# -- demo set -----------------------------------------------------------------------------------------------
def test_demo_catalogue_has_thirty_tools_across_domains():
    assert len(TOOLS) >= 30
    assert len({t.name for t in TOOLS}) == len(TOOLS)
    assert len({t.domain for t in TOOLS}) >= 6


def test_demo_set_size_mix_and_split():
    rows = demo.generate()
    kinds = Counter(r["extra_info"]["demo_kind"] for r in rows)
    assert len(rows) >= 300
    assert set(kinds) == {"single", "optional", "parallel", "multi", "no-call", "history"}
    assert min(kinds.values()) >= 30
    train, test = load_examples(TASK, "train"), load_examples(TASK, "test")
    assert len(train) + len(test) == len(rows)
    assert {e.id for e in train}.isdisjoint({e.id for e in test})
    assert len(test) == 50
    assert Counter(r["extra_info"]["demo_kind"] for r in rows if r["extra_info"]["split"] == "test").keys() == kinds.keys()


def test_demo_set_is_deterministic():
    assert demo.generate() == demo.generate()
    assert Task.data_hash(load_examples(TASK, "test")) == Task.data_hash(load_examples(TASK, "test"))


def test_demo_examples_are_consistent():
    """Every reference call names a tool listed in its prompt, with declared parameters of the declared type."""
    py = {"str": str, "int": int, "float": float, "bool": bool}
    optional_used = 0
    for ex in load_examples(TASK, "train") + load_examples(TASK, "test"):
        tools = ex.meta["tools"]
        for call in ex.meta["reference_calls"]:
            assert call["name"] in tools, ex.id
            for key, value in call["parameters"].items():
                declared = tools[call["name"]][key]["type"]
                optional_used += declared.endswith("optional")
                assert type(value) is py[declared.split(",")[0]], (ex.id, key, value)
        fmt, cor = TASK.score(ex, ex.meta["ground_truth"])
        assert fmt.value == 1.0
        assert cor.value == (3.0 if ex.meta["reference_calls"] else 0.0)
    assert optional_used >= 50


def test_limit_keeps_a_seeded_sample():
    a = load_examples(TASK, "train", limit=20, seed=1)
    assert len(a) == 20 and [e.id for e in a] == [e.id for e in load_examples(TASK, "train", limit=20, seed=1)]
    assert [e.id for e in a] != [e.id for e in load_examples(TASK, "train", limit=20, seed=2)]


def test_unknown_split_lists_the_known_ones():
    with pytest.raises(ValueError, match="train, test"):
        load_examples(TASK, "dev")


# -- rows -----------------------------------------------------------------------------------------------------
SYSTEM = templates.SYSTEM_PROMPT.format(tool_list=templates.TOOL_ENTRY.format(
    index=1, name="GetNews", description="News.", parameters='{"page": {"type": "int", "default": ""}}'))
USER = "**Dialogue Records History**\n<user> news please </user>"
TRUTH = '<think> x </think>\n<tool_call>\n{"name": "GetNews", "parameters": {"page": "1"}}\n</tool_call>'


@pytest.mark.parametrize("row", [
    {"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
     "reward_model": {"ground_truth": TRUTH}, "extra_info": {"index": 7}},
    {"instruction": SYSTEM, "input": USER, "output": TRUTH, "id": 7},
    {"id": "7", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
     "meta": {"ground_truth": TRUTH}},
])
def test_row_layouts_give_the_same_example(row):
    ex = TASK.example_from_row(row)
    assert ex.id == "7"
    assert ex.messages[0]["content"] == SYSTEM and ex.messages[-1]["content"] == USER
    assert ex.meta["kind"] == "tool_call"
    assert ex.meta["reference_calls"] == [{"name": "GetNews", "parameters": {"page": 1}}]  # Appendix B


def test_example_to_json_round_trips_through_example_from_row():
    ex = load_examples(TASK, "test")[3]
    again = TASK.example_from_row(ex.to_json())
    assert again.messages == ex.messages and again.meta == ex.meta


@pytest.mark.parametrize("row,message", [
    ({"reward_model": {"ground_truth": TRUTH}}, "no chat messages"),
    ({"prompt": [{"role": "system", "content": SYSTEM}]}, "no user turn"),
    ({"prompt": [{"role": "user", "content": USER}]}, "no reference answer"),
    ({"prompt": [{"role": "user"}], "output": TRUTH}, "malformed message"),
    ({"prompt": [{"role": "user", "content": USER}], "output": "<think>x</think>\n<tool_call>\nnope\n</tool_call>"},
     "malformed tool call block"),
    ("not a row", "JSON object"),
])
def test_malformed_rows_raise_data_errors_naming_the_place(row, message):
    with pytest.raises(DataError, match=message) as info:
        TASK.example_from_row(row, where="rows.jsonl", index=4)
    assert str(info.value).startswith("rows.jsonl, row 4: ")
    # mrbench score passes the row inside ``where``: the place is named once
    with pytest.raises(DataError, match=message) as info:
        TASK.example_from_row(row, where="rows.jsonl, row 5")
    assert str(info.value).startswith("rows.jsonl, row 5: ") and str(info.value).count(", row ") == 1


def test_parse_tool_list_reads_rlla_system_prompts():
    tools = parse_tool_list(SYSTEM)
    assert tools == {"GetNews": {"page": {"type": "int", "default": ""}}}


# -- blocks and contexts ------------------------------------------------------------------------------------
def test_blocks_come_from_the_templates_and_go_correctness_first():
    ex = next(e for e in load_examples(TASK, "test") if len(e.meta["reference_calls"]) == 2)
    verdicts = TASK.score(ex, "")
    assert verdicts[0].block == templates.FORMAT_BLOCKS["tool_call"]
    for call in ex.meta["reference_calls"]:
        assert json.dumps(call, ensure_ascii=False) in verdicts[1].block
    ctx = TASK.replay_contexts(ex, verdicts, [0, 1])
    last = ctx.all[-1]["content"]
    original = ex.messages[-1]["content"]
    assert last == original + "\n\n" + verdicts[1].block + "\n\n" + verdicts[0].block
    assert ctx.without[0][-1]["content"] == original + "\n\n" + verdicts[1].block
    assert ctx.without[1][-1]["content"] == original + "\n\n" + verdicts[0].block
    assert ex.messages[-1]["content"] == original  # not mutated


def test_no_call_examples_have_a_response_format_block_and_no_correctness_block():
    ex = next(e for e in load_examples(TASK, "test") if e.meta["kind"] == "response")
    fmt, cor = TASK.score(ex, "anything")
    assert fmt.block == templates.FORMAT_BLOCKS["response"] and "<response>" in fmt.block
    assert cor.block is None and cor.value == 0.0
    ctx = TASK.replay_contexts(ex, [fmt, cor], [0, 1])
    assert set(ctx.without) == {0}


def test_teacher_context_shows_the_reference_as_an_earlier_answer():
    ex = load_examples(TASK, "test")[0]
    msgs = TASK.teacher_messages(ex)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["content"] == ex.meta["ground_truth"] and msgs[3]["content"] == ex.messages[-1]["content"]
    with pytest.raises(NotImplementedError):
        TASK.without_rubric(ex)


# -- real data ------------------------------------------------------------------------------------------------
@needs_data
def test_toolrl_files_load_and_references_score_full_format():
    pytest.importorskip("pandas")  # parquet files (the torch-free floor installs no pandas)
    test = load_examples(TASK, "test", data_dir=os.path.join(DATA, "toolrl"))
    train = load_examples(TASK, "train", data_dir=DATA)  # the data root works too (toolrl/ subfolder)
    assert len(test) == 80 and len(train) == 400
    kinds = Counter(e.meta["kind"] for e in test + train)
    print(f"\nToolRL: test {len(test)}, train (SFT file) {len(train)}, kinds {dict(kinds)}")
    assert kinds["tool_call"] > 300 and kinds["response"] > 50
    formats = [TASK.score(e, e.meta["ground_truth"])[0].value for e in test]
    assert sum(formats) == len(test)
    for e in test + train:
        if e.meta["kind"].startswith("tool_call"):
            assert find_call_block(e.meta["ground_truth"]).calls is not None
    converted = [e for e in test if '"1"' in e.meta["ground_truth"] and e.meta["reference_calls"]]
    assert converted and any(1 in c["parameters"].values() for e in converted for c in e.meta["reference_calls"])


@needs_data
def test_a_single_file_can_be_loaded_directly():
    pytest.importorskip("pandas")
    path = os.path.join(DATA, "toolrl", "rlla_4k_test.parquet")
    assert len(load_examples(TASK, "test", data_dir=path)) == 80


def test_hub_names_and_splits():
    from tasks.data_source import HubSource, hub_source, load_examples

    assert hub_source("hub:a/b", "test") == HubSource("a/b", "test")
    assert hub_source("hub:a/b:validation", "train") == HubSource("a/b", "validation")
    assert hub_source("/data/toolrl", "train") is None and hub_source(None, "train") is None
    for old in ("hf:a/b", "hf://a/b"):
        with pytest.raises(DataError, match="hub datasets are written hub:OWNER/NAME"):
            load_examples(TASK, "train", data_dir=old)


def test_missing_split_file_lists_what_was_looked_for(tmp_path):
    with pytest.raises(DataError, match="rlla_4k_test.parquet"):
        load_examples(TASK, "test", data_dir=str(tmp_path))


def test_hub_rows_go_through_the_one_hub_reader(monkeypatch):
    datasets = pytest.importorskip("datasets")
    demo_rows = [r for r in demo.generate() if r["extra_info"]["split"] == "test"][:3]
    monkeypatch.setattr(datasets, "load_dataset", lambda repo, split: demo_rows if split == "test" else [])
    hub = [e.id for e in load_examples(TASK, "train", data_dir="hub:someone/rlla:test")]
    assert hub == [e.id for e in load_examples(TASK, "test")][:3]

    def offline(repo, split):
        raise ConnectionError(f"Couldn't reach {repo!r} on the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"hub:nobody/no-such-rlla:train: could not load it .*Couldn't reach"):
        load_examples(TASK, "train", data_dir="hub:nobody/no-such-rlla:train")
