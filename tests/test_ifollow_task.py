"""The ifollow task: examples, rewards, leave-one-out contexts, generated prompts, rows."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from tasks.base import DataError, Task
from tasks.data_source import load_examples
from tasks.ifollow.generator import POOL, generate_prompt, generate_prompts
from tasks.ifollow.task import InstructionFollowingTask
from tasks.ifollow.template import removed_text, render_prompt
from tasks.ifollow.witness import find_witness
from tasks.registry import TASKS

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)

IFEVAL_ROW = {
    "key": 7,
    "prompt": "Write about cats. Do not use commas. Give it a <<title>>.",
    "instruction_id_list": ["punctuation:no_comma", "detectable_format:title"],
    "kwargs": [{}, {}],
}


@pytest.fixture(scope="module")
def task() -> InstructionFollowingTask:
    return InstructionFollowingTask()


@pytest.fixture(scope="module")
def prompts_5_13():
    return generate_prompts(1000, seed=0, min_constraints=5, max_constraints=13)


def test_registered_zero_arg_task() -> None:
    t = TASKS.get("ifollow")()
    assert isinstance(t, Task) and t.name == "ifollow" and t.format_reward is None


def test_generated_examples_shape_and_determinism(task: InstructionFollowingTask) -> None:
    a = load_examples(task, limit=50, seed=3)
    b = load_examples(task, limit=50, seed=3)
    assert Task.data_hash(a) == Task.data_hash(b)
    assert Task.data_hash(a) != Task.data_hash(load_examples(task, limit=50, seed=4))
    assert Task.data_hash(load_examples(task, limit=20, seed=3)) == Task.data_hash(a[:20])  # prefix-stable
    assert {e.id for e in a}.isdisjoint({e.id for e in load_examples(task, "test", limit=50, seed=3)})
    for ex in a:
        k = len(ex.meta["constraints"])
        assert 5 <= k <= 7
        assert ex.messages == [{"role": "user", "content": ex.meta["prompt"]}]
        assert ex.reward_names == [f"c{i}:{c}" for i, (c, _) in enumerate(ex.meta["constraints"])]
        assert ex.messages[0]["content"] == render_prompt(ex.meta["base"], ex.meta["sentences"])


def test_unknown_split_lists_known(task: InstructionFollowingTask) -> None:
    with pytest.raises(ValueError, match="train"):
        load_examples(task, "nope", limit=1)


def test_score_one_verdict_per_constraint_with_blocks(task: InstructionFollowingTask) -> None:
    ex = load_examples(task, limit=1, seed=11)[0]
    for response in ("", "a plain answer", "Ünïcode, answer\n<<t>>\n* x\nP.S. y"):
        verdicts = task.score(ex, response)
        assert [v.reward for v in verdicts] == ex.reward_names
        assert all(v.value in (0.0, 1.0) and not math.isnan(v.value) for v in verdicts)
        assert [v.block for v in verdicts] == ex.meta["sentences"]
        for v in verdicts:
            assert all(0 <= s <= e <= len(response) for s, e in v.spans)
    assert all(v.value == 0.0 for v in task.score(ex, "   "))  # whitespace fails everything


def test_witness_scores_all_ones(task: InstructionFollowingTask) -> None:
    ex = load_examples(task, limit=1, seed=5)[0]
    witness = find_witness([tuple(c) for c in ex.meta["constraints"]])
    assert witness is not None
    assert [v.value for v in task.score(ex, witness)] == [1.0] * len(ex.reward_names)


def test_leave_one_out_differs_by_exactly_one_constraint_text(task: InstructionFollowingTask) -> None:
    for ex in load_examples(task, limit=100, seed=1):
        verdicts = task.score(ex, "some answer")
        k_all = range(len(verdicts))
        ctx = task.replay_contexts(ex, verdicts, k_all)
        full = ex.messages[0]["content"]
        assert ctx.all == ex.messages
        assert sorted(ctx.without) == list(k_all)
        for k, messages in ctx.without.items():
            reduced = messages[0]["content"]
            pos, text = removed_text(ex.meta["base"], ex.meta["sentences"], k)
            assert ex.meta["sentences"][k] in text and len(text) == len(ex.meta["sentences"][k]) + 1
            assert full[:pos] + full[pos + len(text):] == reduced  # only constraint k's text went
            assert reduced.startswith(full[:pos])  # shared prefix up to the removed sentence
            for j, other in enumerate(ex.meta["sentences"]):
                assert (other in reduced) or j == k
            assert Counter(reduced.split(" ")) != Counter(full.split(" "))


def test_cort_and_joint_contexts(task: InstructionFollowingTask) -> None:
    ex = load_examples(task, limit=1, seed=2)[0]
    assert task.without_rubric(ex) == [{"role": "user", "content": ex.meta["base"]}]
    full, base = task.joint_context(ex, task.score(ex, "x"))
    assert full == ex.messages and base == task.without_rubric(ex)


def test_example_from_row_official_form(task: InstructionFollowingTask) -> None:
    ex = task.example_from_row(IFEVAL_ROW, where="f.jsonl, row 1")
    assert ex.reward_names == ["c0:punctuation:no_comma", "c1:detectable_format:title"]
    assert [v.value for v in task.score(ex, "<<Cats>>\nCats purr.")] == [1.0, 1.0]
    assert [v.value for v in task.score(ex, "Cats, dogs.")] == [0.0, 0.0]
    # the prompt text of each constraint is unknown: blocks are None and nothing is replayed
    verdicts = task.score(ex, "x")
    assert all(v.block is None for v in verdicts)
    assert task.replay_contexts(ex, verdicts, [0, 1]).without == {}


@pytest.mark.parametrize("row,match", [
    ({**IFEVAL_ROW, "instruction_id_list": ["punctuation:no_commas", "detectable_format:title"]},
     r"f\.jsonl, row 3: unknown constraint id 'punctuation:no_commas' \(known ids.*punctuation:no_comma"),
    ({**IFEVAL_ROW, "kwargs": [{}]}, "parallel"),
    ({**IFEVAL_ROW, "kwargs": [{"num_words": 3}, {}]}, "unexpected"),
    ({**IFEVAL_ROW, "prompt": None}, "prompt"),
    ({**IFEVAL_ROW, "instruction_id_list": []}, "instruction_id_list"),
])
def test_example_from_row_errors_name_file_and_row(task: InstructionFollowingTask, row: dict, match: str) -> None:
    with pytest.raises(DataError, match=match):
        task.example_from_row(row, where="f.jsonl, row 3")


def test_null_kwargs_are_dropped(task: InstructionFollowingTask) -> None:
    row = {**IFEVAL_ROW, "kwargs": [{"num_words": None}, {"anything": None}]}
    assert task.example_from_row(row).meta["constraints"] == [["punctuation:no_comma", {}],
                                                             ["detectable_format:title", {}]]


def test_generator_1000_prompts_5_to_13_constraints(prompts_5_13) -> None:
    counts = Counter(len(p.constraints) for p in prompts_5_13)
    assert len(prompts_5_13) == 1000
    assert set(counts) == set(range(5, 14))
    types = Counter(c for p in prompts_5_13 for c, _ in p.constraints)
    assert set(types) == set(POOL)
    for p in prompts_5_13:  # at most one per type, except one lower and one upper bound
        per = Counter(c for c, _ in p.constraints)
        for cid, n in per.items():
            assert n == 1 or (n == 2 and {kw["relation"] for c, kw in p.constraints if c == cid}
                              == {"at least", "less than"})
    print(f"\nK histogram {sorted(counts.items())}; top types {types.most_common(4)}")


def test_every_sampled_prompt_is_jointly_satisfiable(prompts_5_13) -> None:
    """Acceptance: a response satisfying all constraints is constructed for a sample of 50 (we do 200)."""
    sample = prompts_5_13[::5]
    missing = [p.id for p in sample if find_witness(p.constraints) is None]
    print(f"\nwitness found for {len(sample) - len(missing)}/{len(sample)} prompts with 5-13 constraints")
    assert not missing


def test_default_prompts_are_short(task: InstructionFollowingTask) -> None:
    """Measured with the SmolLM2 tokenizer: >= 3.69 characters per token on these prompts (max 129
    tokens for 5-7 constraints, 211 for 13). The test keeps a margin: 3 characters per token."""
    longest = max(len(e.messages[0]["content"]) for e in load_examples(task, limit=1000))
    assert longest / 3 < 300
    longest13 = max(len(p.prompt) for p in generate_prompts(300, seed=9, min_constraints=13, max_constraints=13))
    assert longest13 / 3 < 400


def test_generator_is_pure_in_seed_and_index() -> None:
    assert generate_prompt(17, seed=2) == generate_prompt(17, seed=2)
    assert generate_prompt(17, seed=2).prompt != generate_prompt(18, seed=2).prompt
    with pytest.raises(ValueError):
        generate_prompt(0, min_constraints=4, max_constraints=3)


@pytest.mark.parametrize("name, family", [("c3:punctuation:no_comma", "punctuation:no_comma"),
                                          ("c12:detectable_format:title", "detectable_format:title"),
                                          ("format", "format"), ("cx:thing", "cx:thing")])
def test_reward_family_strips_the_position(name, family):
    assert InstructionFollowingTask().reward_family(name) == family
