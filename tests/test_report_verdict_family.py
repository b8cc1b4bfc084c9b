"""Verdicts that say no more than the seeds (issue 48, item 5): the Holm correction runs over every
comparison a table draws verdicts from (all arms against the baseline, in every column), and the
verdict names that family; with too few seeds the verdict says so first, and a loss is never
called a gain; every line names the test its verdicts came from."""

from __future__ import annotations

import json
import re

import pytest
from report_fixtures import write_base_record

from harness import cli
from harness.config import resolve
from harness.records import RunRecord
from harness.report.method import diff_cell_note, method_note
from harness.report.sequential import Design

INST, PROMPT = "ifollow-heldout/instruction_level", "ifollow-heldout/prompt_level"
SEEDS = 8
#: per (arm, column): the differences from GDPO are 0.001 x powers of two with the smallest ones negated,
#: so the exact sign-flip p is 2 (v + 1) / 2^8 where v is the sum of the negated units (subset sums are unique)
NEGATED = {("a", INST): {2}, ("a", PROMPT): {2}, ("b", INST): {1}, ("b", PROMPT): {4, 32, 64}}
P_EXACT = {("a", INST): 6 / 256, ("a", PROMPT): 6 / 256, ("b", INST): 4 / 256, ("b", PROMPT): 2 * 101 / 256}


def _cfg(root, algo, seed):
    return resolve(None, [("output.root", str(root)), ("task", "ifollow"), ("algo", algo), ("seed", str(seed)),
                          ("model", "tiny-random"), ("schedule.eval_limit", "4")])


def _record(root, algo, seed, summary):
    rec = RunRecord.open(_cfg(root, algo, seed))
    rec.start(seed=seed, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward_mean": 0.5, "reward/keywords:existence": 0.5})
    rec.write_eval({"benchmarks": {"ifollow-heldout": {"summary": summary, "cases": 4}}})
    rec.finish({})
    rec.unlock()


def _base(root, value):
    return write_base_record(root, _cfg(root, "gdpo", 0).to_dict(), value)


def _holm(ps: dict) -> dict:
    """Holm's step-down by hand."""
    order = sorted(ps, key=ps.get)
    out, running = {}, 0.0
    for rank, key in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[key]))
        out[key] = running
    return out


def test_holm_runs_over_every_arm_and_column_of_the_table_and_the_verdict_names_the_family(tmp_path):
    root = tmp_path / "records"
    units = [2 ** k for k in range(SEEDS)]
    for seed, unit in enumerate(units):
        _record(root, "gdpo", seed, {"instruction_level": 0.5, "prompt_level": 0.5})
        for arm, algo in (("a", "mrtpo"), ("b", "grpo")):
            _record(root, algo, seed, {key.split("/")[1]: 0.5 + 0.001 * unit * (-1 if unit in NEGATED[(arm, key)] else 1)
                                       for key in (INST, PROMPT)})
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    rows = {r["algorithm"]: r for r in data["tasks"]["ifollow"]["tables"][0]["rows"]}
    expected = _holm(P_EXACT)
    # 0.0625, 0.0703, 0.0703, 0.789: over the table's 4 comparisons nothing stands, though Holm over each
    # row's 2 columns alone would call three of them (2 x 4/256 = 0.031, 2 x 6/256 = 0.047)
    assert expected[("b", INST)] == pytest.approx(0.0625) and expected[("a", INST)] == pytest.approx(0.0703125)
    for (arm, key), p in P_EXACT.items():
        vs = rows["mrtpo" if arm == "a" else "grpo"]["cells"][key]["vs_baseline"]
        assert vs["p_perm"] == pytest.approx(p) and vs["p_holm"] == pytest.approx(expected[(arm, key)])
        assert vs["holm_family"] == 4 and vs["word"] is None
        assert vs["verdict"].endswith(f"Holm over 4 comparisons with gdpo in this table: {expected[(arm, key)]:.2g})")
    family = data["tasks"]["ifollow"]["tables"][0]["holm_families"]["vs_baseline"]
    assert (family["size"], family["rows"], family["columns"]) == (4, 2, 2)
    verdict = data["verdict"][0]
    assert ("No difference from gdpo reaches a verdict (exact sign-flip test, Holm over the 4 comparisons with "
            "gdpo in the end-of-run benchmarks (2 rows × 2 columns)") in verdict


def _one_seed_each(root, with_base: bool):
    """The newcomer's comparison: MRTPO seeds 0 and 1, GDPO seed 0, then the base model."""
    _record(root, "mrtpo", 0, {"instruction_level": 33 / 48})
    _record(root, "mrtpo", 1, {"instruction_level": 29 / 48})
    _record(root, "gdpo", 0, {"instruction_level": 25 / 48})
    if with_base:
        _base(root, 28 / 48)


@pytest.mark.parametrize("with_base", [False, True])
def test_one_seed_says_first_that_the_seeds_are_too_few_and_never_calls_a_loss_a_gain(tmp_path, capsys, with_base):
    root = tmp_path / "records"
    _one_seed_each(root, with_base)
    capsys.readouterr()
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "out"), "--baseline", "gdpo"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Verdict:\n  ifollow: too few seeds to tell:")
    verdict = json.loads((tmp_path / "out" / "leaderboard.json").read_text())["verdict"][0]
    assert "no comparison to draw" not in verdict and "training gains" not in verdict
    assert f"mrtpo − gdpo on {INST}: +0.167 (1 paired seed)" in verdict  # the table's number, named as one seed
    if with_base:
        assert re.search(rf"differ from the untrained base model on {INST} by -0\.06\d to \+0\.06\d, gains and losses",
                         verdict)
        assert "Change from the base model" in verdict and "Gain over the base model (" not in verdict


def test_every_note_names_the_test_its_verdicts_came_from():
    design = Design(phi=0.891, looks=5, max_seeds=12)
    adaptive, fixed = method_note("gdpo", 3, design=design), method_note("gdpo", 3)
    assert "Verdicts: the anytime-valid p-values of the confidence sequences" in adaptive
    assert "sign-flip" not in adaptive and "2^n" not in adaptive and "0.25 with 3 seeds" not in adaptive
    assert "Verdicts: the exact paired sign-flip permutation test" in fixed and "anytime-valid" not in fixed
    for note in (adaptive, fixed):
        assert "Holm-corrected over one family per table: every row's comparison with the gdpo row" in note
    assert "by the anytime-valid p-values of the confidence sequences" in diff_cell_note(design)
    assert "exact" not in diff_cell_note(design) and "by the exact paired sign-flip" in diff_cell_note(None)
