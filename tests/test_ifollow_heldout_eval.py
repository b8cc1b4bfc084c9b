from evals.ifollow_heldout import IFollowHeldoutEvaluator
from tasks.data_source import load_examples
from tasks.ifollow.witness import find_witness


def test_heldout_cases_are_disjoint_from_training_prompts():
    from tasks.ifollow.task import InstructionFollowingTask

    ev = IFollowHeldoutEvaluator(size=30)
    cases = ev.cases()
    train = load_examples(InstructionFollowingTask(), "train", limit=300)
    assert len(cases) == 30
    assert not {c.meta["prompt"] for c in cases} & {ex.meta["prompt"] for ex in train}


def test_heldout_scores_hand_counted_figures():
    ev = IFollowHeldoutEvaluator(size=3)
    cases = ev.cases()
    ex0 = cases[0].meta["example"]
    witness = find_witness([tuple(c) for c in ex0.meta["constraints"]])
    assert witness is not None
    report = ev.score(cases, {cases[0].id: witness})  # case 0 satisfies all; 1 and 2 have no response
    n0 = len(ex0.meta["constraints"])
    n_all = sum(len(c.meta["example"].meta["constraints"]) for c in cases)
    assert report.summary["prompt_level"] == 1 / 3
    assert report.summary["instruction_level"] == n0 / n_all
    assert [r["valid"] for r in report.rows] == [True, False, False]
    assert [r["missing_response"] for r in report.rows] == [False, True, True]
    assert "ifollow-heldout" in report.table
