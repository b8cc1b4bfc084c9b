"""The committed reference report regenerates from its committed records with `mrbench report`: the
same tables (every mean, interval, p-value and verdict), the same verdict paragraph, and the base row;
a reference whose records mix numerics was made with --pool-across-versions, and its report says so.
`mrbench leaderboard --root results` keeps apart the references whose records do not reproduce each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cli
from harness.leaderboard import build_leaderboard
from harness.report.collect import collect, group_runs

RESULTS = Path(__file__).resolve().parents[1] / "results"
REFERENCES = RESULTS / "reference"
INST, PROMPT = "ifollow-heldout/instruction_level", "ifollow-heldout/prompt_level"
REF = REFERENCES / "ifollow-smollm2"
REF2 = REFERENCES / "ifollow-smollm2-2"


def _regenerated(ref: Path, out: Path) -> dict:
    """``mrbench report`` on a committed reference's records (pooled across versions where its committed
    report was), checked against its committed report."""
    old = json.loads((ref / "leaderboard.json").read_text())
    pool = ["--pool-across-versions"] if old.get("pool_across_versions") else []
    assert cli.main(["report", "--root", str(ref), "--out", str(out), "--baseline", "gdpo", *pool]) == 0
    new = json.loads((out / "leaderboard.json").read_text())
    assert new["tasks"]["ifollow"]["tables"] == old["tasks"]["ifollow"]["tables"]
    assert new["verdict"] == old["verdict"] and new["method"] == old["method"]
    return new


@pytest.mark.skipif(not (REF / "leaderboard.json").exists(), reason="no committed reference report")
def test_the_reference_report_regenerates(tmp_path):
    new = _regenerated(REF, tmp_path)
    rows = {r["label"]: r for r in new["tasks"]["ifollow"]["tables"][0]["rows"]}
    assert rows["base"]["is_base"] and all(rows[a]["base"] == "base" for a in ("gdpo", "grpo", "mrtpo"))
    change_case = {r["label"]: r for r in new["tasks"]["ifollow"]["tables"][1]["rows"]}["grpo"]["cells"]["change_case"]
    assert change_case["vs_baseline"]["word"] is None  # a 3-seed t-test's p = 0.035 is no verdict


@pytest.mark.skipif(not (REF2 / "leaderboard.json").exists(), reason="no committed reference report 2")
def test_the_second_reference_report_regenerates_with_four_finished_seeds_per_arm(tmp_path):
    new = _regenerated(REF2, tmp_path)
    rows = {r["label"]: r for r in new["tasks"]["ifollow"]["tables"][0]["rows"]}
    assert rows["base"]["is_base"]
    for arm in ("gdpo", "grpo", "mrtpo", "mrtpo-oracle"):
        assert len(rows[arm]["seeds"]) >= 4 and rows[arm]["base"] == "base"
    for seed_dir in (REF2 / "ifollow").glob("*/*/seed*"):
        provenance = json.loads((seed_dir / "provenance.json").read_text())
        assert provenance["status"] == "finished" and provenance["git"]["dirty"] is False


REF3 = REFERENCES / "ifollow-smollm2-3"


@pytest.mark.skipif(not (REF3 / "leaderboard.json").exists(), reason="no committed reference report 3")
def test_the_third_reference_report_regenerates_from_its_finished_adaptive_sweep(tmp_path):
    new = _regenerated(REF3, tmp_path)
    state = json.loads((REF3 / "adaptive.json").read_text())
    assert all(rnd["decided"] for rnd in state["rounds"])
    assert "confidence sequence" in new["method"] and f"after each of its {len(state['rounds'])} rounds" in new["method"]
    assert "sign-flip" not in new["method"] and "Verdicts: the anytime-valid p-values" in new["method"]
    verdict = " ".join(new["verdict"])  # corrected over both arms and both benchmark numbers (issue 48)
    assert ("Differs from gdpo (anytime-valid p-values of the confidence sequences, Holm over the 4 comparisons "
            "with gdpo in the end-of-run benchmarks (2 rows × 2 columns)") in verdict
    oracle = {r["label"]: r for r in new["tasks"]["ifollow"]["tables"][0]["rows"]}["mrtpo-oracle"]["cells"]
    inst, prompt = oracle[INST]["vs_baseline"], oracle[PROMPT]["vs_baseline"]
    # the sweep stopped it as resolved (p = 0.039 alone); over the family, 3 x 0.039 = 0.117 does not stand
    assert inst["p_perm"] == pytest.approx(0.039, abs=5e-4) and inst["p_holm"] == pytest.approx(0.117, abs=1e-3)
    assert inst["word"] is None and inst["holm_family"] == 4
    assert prompt["word"] == "higher" and prompt["p_holm"] == pytest.approx(0.0264, abs=1e-4)
    last = {key: d for rnd in state["rounds"] for key, d in rnd.get("decisions", {}).items()}
    assert set(last) == {"ifollow/mrtpo/smollm2-135m", "ifollow/mrtpo-oracle/smollm2-135m"}
    assert all(d["stop"] for d in last.values())  # every arm stopped: the sweep finished, not a snapshot
    rows = {r["label"]: r for r in new["tasks"]["ifollow"]["tables"][0]["rows"]}
    assert rows["base"]["is_base"]
    for key, decision in last.items():
        arm = key.split("/")[1]
        assert len(rows[arm]["seeds"]) == decision["seeds"] and rows[arm]["base"] == "base"
        assert set(rows[arm]["seeds"]) <= set(rows["gdpo"]["seeds"])  # paired: the baseline ran every seed
    for seed_dir in (REF3 / "ifollow").glob("*/*/seed*"):
        provenance = json.loads((seed_dir / "provenance.json").read_text())
        assert provenance["status"] == "finished" and provenance["git"]["dirty"] is False
        assert "host" not in provenance and "model_source" not in provenance, seed_dir  # no machine name or local path


@pytest.mark.skipif(not (REF3 / "leaderboard.json").exists() or not (REF2 / "leaderboard.json").exists(),
                    reason="no committed references 2 and 3")
def test_the_leaderboard_over_all_results_keeps_apart_the_references_that_do_not_reproduce_each_other():
    """Reference 2's GDPO seed 0 (0.601) and reference 3's (0.648) are one configuration and seed: they
    are never one row unless one known fingerprint says they compute the same numbers, and the
    labels say what sets their rows apart (no 12-seed GDPO row of 0.6277 that matches neither report)."""
    by_task, _ = group_runs(collect(RESULTS)[0])
    rows = by_task["ifollow"]

    def reference(path: str) -> str:  # a reference's name, or a sweep in progress's (results/in-progress/)
        parts = Path(path).relative_to(RESULTS).parts
        return parts[1] if parts[0] == REFERENCES.name else "/".join(parts[:2])

    for row in rows:
        if len({reference(r.path) for r in row.runs}) > 1:
            assert all(n.known for n in row.numerics) and len({n.fingerprint for n in row.numerics}) == 1, row.label
    seed0 = {reference(r.path): (row, r) for row in rows if row.algo == "gdpo" for r in row.runs if r.seed == 0}
    (row2, run2), (row3, run3) = seed0["ifollow-smollm2-2"], seed0["ifollow-smollm2-3"]
    assert run2.evals[INST] != run3.evals[INST] and row2 is not row3
    assert row2.label != row3.label and "fingerprint" in row2.label and "fingerprint" in row3.label
    table = build_leaderboard(RESULTS)
    assert f"| ifollow | {row2.label} | smollm2-135m |" in table and f"| ifollow | {row3.label} | smollm2-135m |" in table
    assert "0.6277" not in table and "left out: a second record" not in table


REF4 = REFERENCES / "ifollow-smollm2-4"
REF4_ARMS = ("forking", "gtpo", "ktae")


@pytest.mark.skipif(not (REF4 / "leaderboard.json").exists(), reason="no committed reference report 4")
def test_the_fourth_reference_report_regenerates_from_its_finished_adaptive_sweep(tmp_path):
    """Reference 4 (issue 51): the per-token credit methods against GDPO, seeds until resolved. The report
    regenerates; every arm stopped (the sweep finished); each arm's seeds are GDPO's (paired); every
    record ran at one clean commit, on two kinds of host, and the report pools them on purpose."""
    new = _regenerated(REF4, tmp_path)
    state = json.loads((REF4 / "adaptive.json").read_text())
    assert all(rnd["decided"] for rnd in state["rounds"])
    last = {key: d for rnd in state["rounds"] for key, d in rnd.get("decisions", {}).items()}
    assert set(last) == {f"ifollow/{arm}/smollm2-135m" for arm in REF4_ARMS}
    assert all(d["stop"] for d in last.values())
    assert "confidence sequence" in new["method"]
    rows = {r["label"]: r for r in new["tasks"]["ifollow"]["tables"][0]["rows"]}
    assert rows["base"]["is_base"]
    for key, decision in last.items():
        arm = key.split("/")[1]
        assert len(rows[arm]["seeds"]) == decision["seeds"] and rows[arm]["base"] == "base"
        assert set(rows[arm]["seeds"]) <= set(rows["gdpo"]["seeds"])
    commits, fingerprints = set(), set()
    for seed_dir in (REF4 / "ifollow").glob("*/*/seed*"):
        provenance = json.loads((seed_dir / "provenance.json").read_text())
        assert provenance["status"] == "finished" and provenance["git"]["dirty"] is False
        assert "host" not in provenance and "model_source" not in provenance, seed_dir
        commits.add(provenance["git"]["commit"][:7])
        fingerprints.add(provenance["numerics"]["fingerprint"][:8])
    # one commit, two kinds of host (AMD EPYC, then an Intel Xeon with AMX), and KTAE seed 1 begun on the
    # first and resumed on the second: three fingerprints, pooled on purpose, which the verdict says
    assert commits == {"1f2aea6"} and fingerprints == {"c56bd951", "a1e18b68", "2ef0822d"}
    assert json.loads((REF4 / "leaderboard.json").read_text())["pool_across_versions"] is True
    assert any("Pooled across versions on purpose" in line for line in new["verdict"])
    forking = rows["forking"]["cells"][INST]["vs_baseline"]
    # the sweep stopped forking as resolved (p = 0.015 alone); over 3 arms x 2 numbers it is no verdict
    assert forking["p_perm"] == pytest.approx(0.015, abs=5e-4) and forking["p_holm"] == pytest.approx(0.092, abs=1e-3)
    assert forking["word"] is None and forking["holm_family"] == 6
    assert all(rows[arm]["cells"][INST]["vs_baseline"]["word"] is None for arm in REF4_ARMS)


@pytest.mark.skipif(not (REF4 / "credit-quality" / "credit_quality.json").exists(),
                    reason="no committed credit-quality table of reference 4")
def test_the_fourth_references_credit_quality_table_has_the_oracle_on_top_and_gdpo_uniform():
    table = json.loads((REF4 / "credit-quality" / "credit_quality.json").read_text())
    concentration = {method: row["concentration"] for method, row in table["pooled"].items()}
    assert concentration["gdpo"] == pytest.approx(1.0)
    assert max(concentration, key=concentration.get) == "mrtpo-oracle"
    assert {"gdpo", "mrtpo", "mrtpo-oracle", *REF4_ARMS} <= set(concentration)
    assert "model_source" not in table["settings"]
