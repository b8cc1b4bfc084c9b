"""`mrbench report` on hand-made records: the base row and the gains over it (numbers checked against
scipy), and values that are not what they should be: NaN and Infinity named with their record and
kept out of the statistics, printed as such; an empty root (warning, or exit 2 with --strict);
names with HTML and Markdown in them; strict JSON."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
from report_fixtures import write_base_record
from scipy import stats as sps

from harness import cli
from harness.config import resolve
from harness.records import RunRecord
from mrbench_core.jsonio import atomic_write_json

ACC = {0: 0.62, 1: 0.66, 2: 0.64}
BASE = 0.58


def _cfg(root, algo, seed, model="tiny-random", task="ifollow"):
    return resolve(None, [("output.root", str(root)), ("task", task), ("algo", algo), ("seed", str(seed)),
                          ("model", model), ("schedule.eval_limit", "4")])


def _record(root, algo, seed, acc, *, reward=0.5, model="tiny-random", task="ifollow", extra_eval=None):
    rec = RunRecord.open(_cfg(root, algo, seed, model, task))
    rec.start(seed=seed, task_version="1", data_hash="x")
    for step in (1, 2):
        rec.append_metrics({"step": step, "reward_mean": reward, "reward/keywords:existence": reward})
    summary = {"instruction_level": acc, **(extra_eval or {})}
    rec.write_eval({"benchmarks": {"ifollow-heldout": {"summary": summary, "cases": 4}}})
    rec.finish({})
    rec.unlock()
    return rec.path


def _base(root, value, model="tiny-random"):
    return write_base_record(root, _cfg(root, "gdpo", 0, model).to_dict(), value)


def _strict_load(text):
    def refuse(name):
        raise AssertionError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _report(root, out, *extra):
    assert cli.main(["report", "--root", str(root), "--out", str(out), *extra]) == 0
    return _strict_load((out / "leaderboard.json").read_text()), (out / "leaderboard.md").read_text()


def test_base_row_and_gain_over_base(tmp_path):
    root = tmp_path / "records"
    for seed, acc in ACC.items():
        _record(root, "gdpo", seed, acc)
    _base(root, BASE)
    _base(root, 0.3, model="other-model")  # another model's base row: not this row's
    data, md = _report(root, tmp_path / "out")
    table = data["tasks"]["ifollow"]["tables"][0]
    rows = {(r["label"], r["model"]): r for r in table["rows"]}
    base = rows[("base", "tiny-random")]
    assert base["is_base"] and base["cells"]["ifollow-heldout/instruction_level"]["mean"] == BASE
    assert "vs_baseline" not in base["cells"]["ifollow-heldout/instruction_level"] and base["baseline"] is None
    gdpo = rows[("gdpo", "tiny-random")]
    assert gdpo["base"] == "base"
    gain = gdpo["cells"]["ifollow-heldout/instruction_level"]["gain_over_base"]
    xs = np.array(list(ACC.values()))
    boot = sps.bootstrap((xs - BASE,), np.mean, n_resamples=9999, method="percentile", rng=np.random.default_rng(0))
    t = sps.ttest_1samp(xs, BASE)
    assert gain["diff"] == pytest.approx(xs.mean() - BASE)
    assert gain["ci"] == pytest.approx([t.confidence_interval().low - BASE, t.confidence_interval().high - BASE])
    assert gain["ci_bootstrap"] == pytest.approx([boot.confidence_interval.low, boot.confidence_interval.high])
    assert gain["p_t"] == pytest.approx(t.pvalue)
    assert gain["p_perm"] == pytest.approx(0.25) and gain["prob_improvement"] == 1.0 and gain["word"] is None
    assert "| base | tiny-random | — | 0.580 |" in md and "Gain over the base model:" in md
    assert "rules out gains above" in md and "## Verdict" in md and "training gains +0.060 over the untrained base model on ifollow-heldout/instruction\\_level" in md
    assert rows[("base", "other-model")]["cells"]["ifollow-heldout/instruction_level"]["mean"] == 0.3


def test_nan_and_infinity_are_named_kept_out_and_printed_as_such(tmp_path):
    root = tmp_path / "records"
    good = _record(root, "gdpo", 0, 0.6)
    bad = _record(root, "gdpo", 1, float("nan"), reward=float("nan"), extra_eval={"prompt_level": float("inf")})
    _record(root, "gdpo", 2, 0.7)
    data, md = _report(root, tmp_path / "out")
    named = [p for p in data["left_out"] if p.startswith(str(bad))]
    assert any("eval.json ifollow-heldout/instruction_level is NaN" in p for p in named)
    assert any("eval.json ifollow-heldout/prompt_level is inf" in p for p in named)
    assert any("metrics.jsonl step 1 reward_mean is NaN" in p for p in named)
    assert not any(p.startswith(str(good)) for p in data["left_out"])
    cells = data["tasks"]["ifollow"]["tables"][0]["rows"][0]["cells"]
    acc = cells["ifollow-heldout/instruction_level"]
    assert acc["n"] == 2 and acc["mean"] == pytest.approx(0.65) and acc["left_out"] == ["seed 1: NaN"]
    assert cells["ifollow-heldout/prompt_level"] == {**cells["ifollow-heldout/prompt_level"], "n": 0, "mean": None,
                                                    "left_out": ["seed 1: inf"]}
    assert "(n=2; left out: seed 1: NaN)" in md and "left out: seed 1: inf" in md
    assert "inf ±" not in md and "nan ±" not in md.lower() and "[0.000, —]" not in md


def test_nulls_and_benchmarks_not_run_are_named_too(tmp_path):
    root = tmp_path / "records"
    path = _record(root, "gdpo", 0, 0.6)
    _record(root, "gdpo", 1, 0.7)
    metrics = (path / "metrics.jsonl").read_text().splitlines()
    metrics[1] = json.dumps({"step": 2, "reward_mean": None, "reward/keywords:existence": 0.5})
    (path / "metrics.jsonl").write_text("\n".join(metrics) + "\n")
    atomic_write_json(path / "eval.json", {"benchmarks": {
        "ifollow-heldout": {"summary": {"instruction_level": None}, "cases": 4},
        "ifeval": {"error": "no data under /nowhere"}}})
    data, md = _report(root, tmp_path / "out")
    named = [p.removeprefix(f"{path}: ") for p in data["left_out"] if p.startswith(str(path))]
    assert "eval.json ifollow-heldout/instruction_level is null: left out of its column" in named
    assert "eval.json ifeval was not evaluated (no data under /nowhere): no column" in named
    assert "metrics.jsonl step 2 reward_mean is null: left out of the curve and the final value" in named
    assert "(n=1; left out: seed 0: null)" in md


def test_an_empty_root_warns_or_with_strict_fails(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    assert cli.main(["report", "--root", str(tmp_path / "empty"), "--out", str(out)]) == 0
    assert "warning: no finished run under" in capsys.readouterr().err
    assert _strict_load((out / "leaderboard.json").read_text())["tasks"] == {}
    assert cli.main(["report", "--root", str(tmp_path / "empty"), "--out", str(tmp_path / "o2"), "--strict"]) == 2
    assert "nothing to report (--strict)" in capsys.readouterr().err and not (tmp_path / "o2").exists()


def test_names_are_escaped_in_markdown_as_in_html(tmp_path):
    root = tmp_path / "records"
    name = "<script>alert(1)</script>*bold*_x_|[link](http://e)"
    for seed in (0, 1):
        _record(root, "gdpo", seed, 0.5 + seed / 10, model=name)
    data, md = _report(root, tmp_path / "out")
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "\\*bold\\*" in md and "\\_x\\_" in md and "\\[link\\]" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<script>alert" not in html
    assert data["tasks"]["ifollow"]["tables"][0]["rows"][0]["model"] == name  # JSON keeps the name as it is


def test_json_is_strict_and_csv_leaves_undefined_numbers_empty(tmp_path):
    root = tmp_path / "records"
    _record(root, "gdpo", 0, float("inf"))
    _record(root, "mrtpo", 0, 0.5)
    data, _ = _report(root, tmp_path / "out")  # one seed each: std, intervals and p-values are undefined
    mrtpo = next(r for r in data["tasks"]["ifollow"]["tables"][0]["rows"] if r["algorithm"] == "mrtpo")
    assert mrtpo["cells"]["ifollow-heldout/instruction_level"]["std"] is None
    with open(tmp_path / "out" / "leaderboard.csv", newline="") as fh:
        lines = list(csv.DictReader(fh))
    numbers = ("mean", "std", "ci_low", "ci_high", "iqm", "diff", "p_t", "p_perm", "prob_improvement")
    assert lines and all(line[k].lower() not in ("nan", "inf", "-inf") for line in lines for k in numbers)
    assert any(line["left_out"] == "seed 0: inf" for line in lines)
    assert math.isfinite(mrtpo["cells"]["ifollow-heldout/instruction_level"]["mean"])


def test_effect_sets_the_seeds_needed_figure(tmp_path, capsys):
    root = tmp_path / "records"
    for seed, acc in ACC.items():
        _record(root, "gdpo", seed, acc)
        _record(root, "mrtpo", seed, acc + 0.01 * (seed - 1) + 0.005)
    data, md = _report(root, tmp_path / "out", "--effect", "0.02")
    mrtpo = next(r for r in data["tasks"]["ifollow"]["tables"][0]["rows"] if r["algorithm"] == "mrtpo")
    vs = mrtpo["cells"]["ifollow-heldout/instruction_level"]["vs_baseline"]
    assert vs["effect"] == 0.02 and vs["seeds_text"] == f"about {vs['seeds_needed']} seeds for ±0.02"
    assert "the seeds that would detect ±0.02" in md  # the JSON's seeds_needed, as the method note says
    default, _ = _report(root, tmp_path / "default")
    row = next(r for r in default["tasks"]["ifollow"]["tables"][0]["rows"] if r["algorithm"] == "mrtpo")
    assert row["cells"]["ifollow-heldout/instruction_level"]["vs_baseline"]["effect"] == 0.01  # one point of a share
    assert cli.main(["report", "--root", str(root), "--out", str(tmp_path / "bad"), "--effect", "-1"]) == 2
    assert "--effect -1.0: must be a positive number" in capsys.readouterr().err


def test_every_number_of_a_comparison_is_the_libraries(tmp_path):
    """The report's JSON for fixed per-seed values against scipy and rliable, computed here."""
    from rliable import metrics as rl

    ours = {0: 0.651, 1: 0.645, 2: 0.656, 3: 0.660, 4: 0.641, 5: 0.652}
    theirs = {0: 0.648, 1: 0.642, 2: 0.655, 3: 0.650, 4: 0.649, 5: 0.640}
    root = tmp_path / "records"
    for seed, value in ours.items():
        _record(root, "gdpo", seed, theirs[seed])
        _record(root, "mrtpo", seed, value)
    data, md = _report(root, tmp_path / "out", "--effect", "0.02")
    rows = {r["algorithm"]: r for r in data["tasks"]["ifollow"]["tables"][0]["rows"]}
    cell = rows["mrtpo"]["cells"]["ifollow-heldout/instruction_level"]
    vs = cell["vs_baseline"]
    x, y = np.array(list(ours.values())), np.array(list(theirs.values()))
    rng = lambda: np.random.default_rng(0)
    t = sps.ttest_rel(x, y)
    assert vs["ci"] == pytest.approx(list(t.confidence_interval())) and vs["p_t"] == pytest.approx(t.pvalue)
    boot = sps.bootstrap((x - y,), np.mean, n_resamples=9999, method="percentile", rng=rng()).confidence_interval
    assert vs["ci_bootstrap"] == pytest.approx([boot.low, boot.high])
    exact = sps.permutation_test((x, y), lambda a, b, axis=-1: np.mean(a - b, axis=axis), permutation_type="samples",
                                 n_resamples=np.inf)
    assert vs["p_perm"] == pytest.approx(exact.pvalue) and vs["p_holm"] == pytest.approx(min(1, 1 * exact.pvalue))
    assert vs["prob_improvement"] == pytest.approx(rl.probability_of_improvement(x[:, None], y[:, None]))
    sd = (x - y).std(ddof=1)
    powers = {n: sps.nct.sf(sps.t.ppf(0.975, n - 1), n - 1, 0.02 / (sd / np.sqrt(n)))
              + sps.nct.cdf(-sps.t.ppf(0.975, n - 1), n - 1, 0.02 / (sd / np.sqrt(n))) for n in range(2, 60)}
    needed = max(min(n for n, p in powers.items() if p >= 0.8), 6)  # the exact test needs 6 seeds for p < 0.05
    assert vs["seeds_needed"] == needed
    # the smallest effect these 6 seeds detect with 80% power: the effect at which that power is 0.8
    crit = sps.t.ppf(0.975, 5)
    power = lambda e: sps.nct.sf(crit, 5, e / (sd / np.sqrt(6))) + sps.nct.cdf(-crit, 5, e / (sd / np.sqrt(6)))
    mde = vs["smallest_detectable"]
    assert power(mde) == pytest.approx(0.8, abs=1e-6) and power(0.99 * mde) < 0.8
    assert f"smallest effect detectable with these 6 seeds: ±{mde:.3f}" in md
    summary = sps.bootstrap((x,), np.mean, n_resamples=9999, method="percentile", rng=rng()).confidence_interval
    assert cell["ci"] == pytest.approx([summary.low, summary.high]) and cell["iqm"] == pytest.approx(rl.aggregate_iqm(x))
