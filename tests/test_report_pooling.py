"""Reports and leaderboards say what they pool (issue 48, item 2): records of one configuration whose
numerics differ are separate rows, labelled by what differs; ``--pool-across-versions`` merges them
and says so; a record without a fingerprint counts as unknown and pools only with unknown records of
the same commit and versions; a second record of a seed says whether it agrees with the one kept."""

from __future__ import annotations

import json

import pytest

from harness import cli
from harness.config import resolve
from harness.leaderboard import build_leaderboard
from harness.records import RunRecord
from harness.report.collect import collect, group_runs
from harness.report.pooling import Numerics, read_numerics, split_labels
from mrbench_core.jsonio import atomic_write_json

ACC = "ifollow-heldout/instruction_level"
COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def _numerics(fingerprint: str | None, commit: str, device: str = "cpu-avx512bf16") -> dict:
    return {"fingerprint": fingerprint, "fingerprint_source": "run" if fingerprint else None, "commit": commit,
            "dirty": False, "versions": {"torch": "2.13.0+cpu", "transformers": "5.19.0", "vllm": None},
            "device_class": device, "device": {}, "dtypes": {}, "kernels": {}}


def _record(root, algo, seed, acc, numerics: dict | None, commit: str = COMMIT_A):
    cfg = resolve(None, [("output.root", str(root)), ("task", "ifollow"), ("algo", algo), ("seed", str(seed)),
                         ("model", "tiny-random"), ("schedule.eval_limit", "4")])
    rec = RunRecord.open(cfg)
    rec.start(seed=seed, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward_mean": 0.5, "reward/keywords:existence": 0.5})
    rec.write_eval({"benchmarks": {"ifollow-heldout": {"summary": {"instruction_level": acc}, "cases": 4}}})
    rec.finish({})
    rec.unlock()
    provenance = json.loads((rec.path / "provenance.json").read_text())
    provenance["git"] = {"commit": commit, "dirty": False}
    provenance["versions"] = {"torch": "2.13.0+cpu", "transformers": "5.19.0", "vllm": None}
    provenance.pop("numerics", None)
    if numerics is not None:
        provenance["numerics"] = numerics
    atomic_write_json(rec.path / "provenance.json", provenance)
    return rec.path


def _two_versions(root, *, fingerprints=("f" * 16, "e" * 16), commits=(COMMIT_A, COMMIT_B), more_seeds=0):
    """GDPO and MRTPO, seeds 0-2, made twice: under root/a with the first numerics, under root/b with
    the second (and ``more_seeds`` more seeds there)."""
    for part, fingerprint, commit, shift in zip("ab", fingerprints, commits, (0.0, 0.05)):
        numerics = _numerics(fingerprint, commit) if fingerprint is not False else None
        for seed in range(3 + (more_seeds if part == "b" else 0)):
            _record(root / part, "gdpo", seed, 0.60 + shift + seed / 100, numerics, commit)
            _record(root / part, "mrtpo", seed, 0.62 + shift + seed / 100, numerics, commit)


def _report(root, out, *extra):
    assert cli.main(["report", "--root", str(root), "--out", str(out), *extra]) == 0
    return json.loads((out / "leaderboard.json").read_text())


def _rows(data) -> dict:
    return {r["label"]: r for r in data["tasks"]["ifollow"]["tables"][0]["rows"]}


def test_one_configuration_with_two_fingerprints_is_two_labelled_rows_in_report_and_leaderboard(tmp_path):
    _two_versions(tmp_path / "records")
    data = _report(tmp_path / "records", tmp_path / "out")
    rows = _rows(data)
    assert set(rows) == {f"{algo} (commit {c[:7]}, fingerprint {f})" for algo in ("gdpo", "mrtpo")
                         for c, f in ((COMMIT_A, "f" * 8), (COMMIT_B, "e" * 8))}
    for label, row in rows.items():  # each row is compared with the baseline of its own numerics only
        assert len(row["seeds"]) == 3
        if label.startswith("mrtpo"):
            assert row["baseline"] == label.replace("mrtpo", "gdpo")
            assert row["cells"][ACC]["vs_baseline"]["diff"] == pytest.approx(0.02)
    verdict = " ".join(data["verdict"])
    assert "Kept apart by their numerics" in verdict and "--pool-across-versions merges them" in verdict
    assert not data["pool_across_versions"]

    table = build_leaderboard(tmp_path / "records")
    assert f"| ifollow | gdpo (commit {COMMIT_A[:7]}, fingerprint ffffffff) | tiny-random | 3 | 0.61 ± 0.01" in table
    assert f"| ifollow | gdpo (commit {COMMIT_B[:7]}, fingerprint eeeeeeee) | tiny-random | 3 | 0.66 ± 0.01" in table
    assert "one configuration in 2 rows by its records' numerics" in table and "left out" not in table


def test_pooling_across_versions_gives_one_row_and_the_verdict_says_so(tmp_path):
    _two_versions(tmp_path / "records", more_seeds=2)
    data = _report(tmp_path / "records", tmp_path / "out", "--pool-across-versions")
    rows = _rows(data)
    assert set(rows) == {"gdpo", "mrtpo"} and data["pool_across_versions"]
    assert rows["gdpo"]["seeds"] == [0, 1, 2, 3, 4]  # seeds 0-2 from root/a, 3-4 from root/b
    verdict = " ".join(data["verdict"])
    assert "Pooled across versions on purpose (--pool-across-versions)" in verdict
    assert f"commits {COMMIT_A[:7]}, {COMMIT_B[:7]}" in verdict and "fingerprints ffffffff, eeeeeeee" in verdict
    assert "pooled across versions on purpose (--pool-across-versions)" in data["method"]
    left_out = [p for p in data["left_out"] if "a second record of seed" in p]
    assert len(left_out) == 6  # each seed twice: the second of each is left out, and it says they disagree
    assert all("the two disagree on 1 of 3 numbers" in p and "their numerics differ" in p for p in left_out)

    table = build_leaderboard(tmp_path / "records", pool_across_versions=True)
    assert "| ifollow | gdpo | tiny-random | 5 |" in table
    assert "pooled across versions on purpose (--pool-across-versions): 2 row(s) mix records" in table


def test_records_of_one_fingerprint_pool_whatever_their_commits(tmp_path):
    _two_versions(tmp_path / "records", fingerprints=("f" * 16, "f" * 16))
    by_task, left_out = group_runs(collect(tmp_path / "records")[0])
    assert [g.label for g in by_task["ifollow"]] == ["gdpo", "mrtpo"]
    assert len(left_out) == 6 and all("same configuration and numerics" in p for p in left_out)


def test_unknown_records_of_two_commits_do_not_pool_and_say_that_they_are_unknown(tmp_path):
    _two_versions(tmp_path / "records", fingerprints=(False, False))
    by_task, left_out = group_runs(collect(tmp_path / "records")[0])
    labels = sorted(g.label for g in by_task["ifollow"])
    assert labels == sorted(f"{algo} (commit {c[:7]}, fingerprint unknown)" for algo in ("gdpo", "mrtpo")
                            for c in (COMMIT_A, COMMIT_B)) and not left_out
    table = build_leaderboard(tmp_path / "records")
    assert "fingerprint unknown for 12 of 12 records" in table


def test_an_unknown_record_and_a_fingerprinted_one_of_one_commit_are_kept_apart(tmp_path):
    _record(tmp_path / "a", "gdpo", 0, 0.6, None)
    _record(tmp_path / "b", "gdpo", 0, 0.6, _numerics("f" * 16, COMMIT_A))
    by_task, left_out = group_runs(collect(tmp_path)[0])
    assert sorted(g.label for g in by_task["ifollow"]) == [
        "gdpo (device cpu-avx512bf16, fingerprint ffffffff)", "gdpo (device not recorded, fingerprint unknown)"]
    assert not left_out


def test_a_second_record_of_a_seed_says_whether_the_two_agree(tmp_path):
    _record(tmp_path / "a", "gdpo", 0, 0.601, None)
    _record(tmp_path / "b", "gdpo", 0, 0.601, None)
    _record(tmp_path / "c", "gdpo", 1, 0.648, None)
    _record(tmp_path / "d", "gdpo", 1, 0.610, None)
    _, left_out = group_runs(collect(tmp_path)[0])
    agree, disagree = sorted(left_out, key=lambda p: "disagree" in p)
    assert "seed 0" in agree and "the two agree on all 3 numbers" in agree
    assert "seed 1" in disagree and f"{ACC} 0.61 against 0.648" in disagree


def test_a_references_sidecar_gives_its_records_their_fingerprints(tmp_path):
    path = _record(tmp_path / "ref", "gdpo", 0, 0.6, None)
    block = {**_numerics("c" * 16, COMMIT_A), "fingerprint_source": "computed-afterwards"}
    atomic_write_json(tmp_path / "ref" / "numerics.json",
                      {"records": {path.relative_to(tmp_path / "ref").as_posix(): block}})
    numerics = read_numerics(path, json.loads((path / "provenance.json").read_text()))
    assert numerics.fingerprint == "c" * 16 and numerics.source == "computed-afterwards"


@pytest.mark.torchfree
def test_labels_name_only_the_fields_that_differ():
    def n(commit, torch="2.13.0", device="cpu", fingerprint=None):
        return Numerics(fingerprint, None, commit, False, (("torch", torch), ("transformers", "5"), ("vllm", None)),
                        device)

    assert split_labels([[n("1" * 40), n("2" * 40)], [n("3" * 40)]]) == [
        "commits 1111111, 2222222, fingerprint unknown", "commit 3333333, fingerprint unknown"]
    assert split_labels([[n("1" * 40, device="cpu-a")], [n("1" * 40, torch="2.14.0", device="cpu-b")]]) == [
        "device cpu-a, torch 2.13.0, fingerprint unknown", "device cpu-b, torch 2.14.0, fingerprint unknown"]
    assert split_labels([[n("1" * 40, fingerprint="ab" * 8)], [n("1" * 40, fingerprint="cd" * 8)]]) == [
        "fingerprint abababab", "fingerprint cdcdcdcd"]
