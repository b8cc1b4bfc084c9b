"""HIR-16K: HiR's six templates (P_all and every P_\\k), the row loader, its checkers and its errors.

The expected prompts are written out by hand from HiR's template rules (see
:mod:`tasks.ifollow.hir_template`), one hand-made row per template variant.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.base import DataError
from tasks.data_source import load_examples
from tasks.ifollow.hir import load_local, row_type
from tasks.ifollow.hir_template import as_sentences, render_hir
from tasks.ifollow.task import InstructionFollowingTask

Q = "Write a poem about the sea."
C = ["Do not use any commas",
     "Your response should contain at least 3 sentences.",
     "Finish your response with this exact phrase: Is there anything else I can help with?"]
IDS = ["punctuation:no_comma", "length_constraints:number_sentences", "startend:end_checker"]
KWARGS = [{}, {"relation": "at least", "num_sentences": 3},
          {"end_phrase": "Is there anything else I can help with?"}]

S0 = "Do not use any commas."
S1, S2 = C[1], C[2]

#: q_type -> (P_all, [P_\0, P_\1, P_\2])
VARIANTS = {
    "type1": (f"{Q} {S0} {S1} {S2}", [f"{Q} {S1} {S2}", f"{Q} {S0} {S2}", f"{Q} {S0} {S1}"]),
    "type2": (f"{Q}\n{S0} {S1} {S2}", [f"{Q}\n{S1} {S2}", f"{Q}\n{S0} {S2}", f"{Q}\n{S0} {S1}"]),
    "type3": (
        f"{Q}\n\nThe output must follow the following rules:\n1. {C[0]}\n2. {C[1]}\n3. {C[2]}",
        [f"{Q}\n\nThe output must follow the following rules:\n1. {C[1]}\n2. {C[2]}",
         f"{Q}\n\nThe output must follow the following rules:\n1. {C[0]}\n2. {C[2]}",
         f"{Q}\n\nThe output must follow the following rules:\n1. {C[0]}\n2. {C[1]}"]),
    "type4": (f"{Q}\n\n- {C[0]}\n- {C[1]}\n- {C[2]}",
              [f"{Q}\n\n- {C[1]}\n- {C[2]}", f"{Q}\n\n- {C[0]}\n- {C[2]}", f"{Q}\n\n- {C[0]}\n- {C[1]}"]),
    "type5": (f"{S0} {S1} {S2}\n\n{Q}", [f"{S1} {S2}\n\n{Q}", f"{S0} {S2}\n\n{Q}", f"{S0} {S1}\n\n{Q}"]),
    "type6": (f"{Q}\n\n{C[0]}\n{C[1]}\n{C[2]}",
              [f"{Q}\n\n{C[1]}\n{C[2]}", f"{Q}\n\n{C[0]}\n{C[2]}", f"{Q}\n\n{C[0]}\n{C[1]}"]),
}


def hir_row(q_type: str, *, key: str = "r", data_source: str = "type1", ids=IDS, kwargs=KWARGS, criteria=C,
            question: str = Q, prompt: str | None = None, truth_as_text: bool = True) -> dict:
    truth = {"instruction_id_list": list(ids), "kwargs": list(kwargs)}
    row = {"data_source": data_source, "key": key,
           "prompt": [{"role": "user", "content": prompt if prompt is not None else VARIANTS[q_type][0]}],
           "reward_model": {"style": "rule", "ground_truth": json.dumps(truth) if truth_as_text else truth},
           "extra_info": {"question": question, "criteria": list(criteria), "q_type": q_type}}
    return row


def _write(tmp_path: Path, rows: list, name: str = "hir.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("q_type", sorted(VARIANTS))
def test_template_renders_p_all_and_each_leave_one_out(q_type: str) -> None:
    full, without = VARIANTS[q_type]
    assert render_hir(Q, C, q_type) == full
    assert [render_hir(Q, C, q_type, skip=k) for k in range(3)] == without


@pytest.mark.parametrize("criteria,expected", [
    (["a", "b"], "a. b."),
    (["a,", "b!", "c?", "d."], "a, b! c? d."),  # , . ? ! end a criterion already: one space only
    (["a ", "b"], "a . b."),  # a trailing space is not an end mark
    ([" a", "b\n"], "a. b\n."),  # outer whitespace of the whole block only
])
def test_as_sentences_table(criteria: list[str], expected: str) -> None:
    assert as_sentences(criteria) == expected


def test_leaving_out_the_only_criterion_leaves_the_question() -> None:
    for q_type in VARIANTS:
        assert render_hir(Q, ["Be brief."], q_type, skip=0) == Q


@pytest.mark.parametrize("q_type", sorted(VARIANTS))
def test_task_contexts_follow_hirs_template(tmp_path: Path, q_type: str) -> None:
    _write(tmp_path, [hir_row(q_type)])
    task = InstructionFollowingTask()
    (ex,) = load_examples(task, data_dir=str(tmp_path))
    full, without = VARIANTS[q_type]
    assert ex.messages == [{"role": "user", "content": full}]
    assert ex.reward_names == [f"c{k}:{cid}" for k, cid in enumerate(IDS)]
    verdicts = task.score(ex, "A calm sea. A bright sky. Is there anything else I can help with?")
    assert [v.block for v in verdicts] == C
    ctx = task.replay_contexts(ex, verdicts, range(3))
    assert ctx.all == [{"role": "user", "content": full}]
    assert sorted(ctx.without) == [0, 1, 2]  # every constraint replayed: MRTPO is not GDPO here
    assert [ctx.without[k][0]["content"] for k in range(3)] == without
    assert task.without_rubric(ex)[0]["content"] == Q


def test_type1_rows_use_ifeval_checkers_type2_rows_ifbench_checkers(tmp_path: Path) -> None:
    ifbench = hir_row("type4", key="b", data_source="type2", ids=["count:numbers", "format:no_whitespace"],
                      kwargs=[{"N": 2, "small_n": None}, {}],
                      criteria=["Include exactly 2 numbers in the response.",
                                "The output should not contain any whitespace."],
                      prompt=f"{Q}\n\n- Include exactly 2 numbers in the response.\n"
                             "- The output should not contain any whitespace.")
    _write(tmp_path, [hir_row("type3", key="a"), ifbench])
    task = InstructionFollowingTask()
    first, second = load_examples(task, data_dir=str(tmp_path))
    assert [e.meta["source"] for e in (first, second)] == ["hir-type1", "hir-type2"]
    response = "I have 3 cats, 4 dogs. Two sentences only."
    assert [v.value for v in task.score(first, response)] == [0.0, 0.0, 0.0]  # comma; 2 sentences; no end phrase
    assert [v.value for v in task.score(second, response)] == [1.0, 0.0]
    assert second.meta["constraints"][0] == ["count:numbers", {"N": 2}]


def test_ground_truth_as_object_or_pair_list_and_other_subsets_skipped(tmp_path: Path) -> None:
    pairs = hir_row("type6", key="p")
    pairs["reward_model"]["ground_truth"] = json.dumps(
        [{"instruction_id": i, "kwargs": k} for i, k in zip(IDS, KWARGS)])
    judged = {"data_source": "type3", "prompt": "Judge me", "extra_info": {}}
    _write(tmp_path, [hir_row("type5", truth_as_text=False), judged, pairs])
    items = load_local(tmp_path)
    assert [i.id for i in items] == ["hir-r", "hir-p"]
    assert items[1].constraints == items[0].constraints


def test_row_types() -> None:
    assert [row_type(r) for r in ({"data_source": "type1"}, {"data_source": "type2"}, {"type": 3}, {})] == [
        "type1", "type2", "type3", "type1"]


def _bad(**changes) -> dict:
    row = hir_row("type3")
    for key, value in changes.items():
        if key.startswith("info_"):
            row["extra_info"][key[5:]] = value
        elif value is None:
            row.pop(key)
        else:
            row[key] = value
    return row


@pytest.mark.parametrize("bad,match", [
    (_bad(extra_info=None), r"row 2: .*extra_info.*question.*criteria.*q_type"),
    (_bad(info_criteria=C[:2]), r"row 2: extra_info.criteria lists 2 texts for 3 constraints"),
    (_bad(info_q_type="type7"), r"row 2: extra_info: unknown q_type 'type7'"),
    (_bad(info_criteria=["", C[1], C[2]]), r"row 2: extra_info: criteria \[0\] are empty"),
    (_bad(prompt=VARIANTS["type4"][0]), r"row 2: the prompt is not HiR's type3 template .*character 29"),
    (_bad(data_source="type2"), r"row 2: type2 rows are scored with the ifbench checkers .*punctuation:no_comma"),
    (_bad(reward_model={"ground_truth": "{oops"}), r"row 2: 'reward_model.ground_truth' is not valid JSON"),
    (_bad(reward_model=None), r"row 2: row has neither 'reward_model.ground_truth'"),
    (_bad(reward_model={"ground_truth": json.dumps({"instruction_id_list": ["nope:id"], "kwargs": [{}]})}),
     r"row 2: unknown constraint id 'nope:id'"),
    ("{not json", r"row 2: not valid JSON"),
])
def test_loader_errors_name_file_and_row(tmp_path: Path, bad, match: str) -> None:
    path = _write(tmp_path, [hir_row("type3"), bad])
    with pytest.raises(DataError, match=match) as err:
        load_local(path)
    assert str(path) in str(err.value)


def test_a_row_without_prompt_gets_hirs_rendering(tmp_path: Path) -> None:
    _write(tmp_path, [_bad(prompt=None)])
    (item,) = load_local(tmp_path)
    assert item.prompt == VARIANTS["type3"][0]


def test_missing_folder_is_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_local(tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match=r"no \*\.jsonl"):
        load_local(tmp_path)


def test_hub_rows_load_and_the_error_path_is_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    calls = []

    def fake_load_dataset(repo, split):
        calls.append((repo, split))
        return [hir_row("type2"), {"data_source": "type4"}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    (ex,) = load_examples(InstructionFollowingTask(), data_dir="hub:sastpg/HIR-16K")
    assert calls == [("sastpg/HIR-16K", "train")] and ex.meta["hir_q_type"] == "type2"

    def refuse(*args, **kwargs):
        raise ConnectionError("no network here")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    with pytest.raises(DataError, match=r"hub:sastpg/HIR-16K:train: .*no network here.*--task\.data_dir PATH"):
        load_examples(InstructionFollowingTask(), data_dir="hub:sastpg/HIR-16K")
