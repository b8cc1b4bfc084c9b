"""The committed reference report regenerates from its committed records with `mrbench report`: the
same tables (every mean, interval, p-value and verdict), the same verdict paragraph, and the base row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import cli

REFERENCES = Path(__file__).resolve().parents[1] / "results" / "reference"
REF = REFERENCES / "ifollow-smollm2"
REF2 = REFERENCES / "ifollow-smollm2-2"


def _regenerated(ref: Path, out: Path) -> dict:
    """``mrbench report`` on a committed reference's records, checked against its committed report."""
    assert cli.main(["report", "--root", str(ref), "--out", str(out), "--baseline", "gdpo"]) == 0
    new, old = (json.loads((d / "leaderboard.json").read_text()) for d in (out, ref))
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
    verdict = " ".join(new["verdict"])  # the oracle arm is resolved higher, by the confidence sequences' own p-values
    assert "Differs from gdpo (anytime-valid p-values of the confidence sequences, Holm-corrected)" in verdict
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
