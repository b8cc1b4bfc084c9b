"""The credit-quality table: hand-computed figures, and ``mrbench localize --algo`` on the tiny model.

The toy task's ``format`` verifier reads the first character and ``letter`` the ASCII letters, so
its pairs include partial reads; ``short`` reads the whole response and is never an instance."""

from __future__ import annotations

import json

import numpy as np
import pytest
import toy_task
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from harness.credit.quality import credit_quality, csv_text, markdown, rank_correlation

READ = np.array([[[1, 1, 0, 0]], [[0, 0, 0, 1]]], dtype=bool)  # [B=2, K=1, T=4]
INSTANCES = np.ones((2, 1), dtype=bool)
FAMILIES = [["a"], ["b"]]


def table(**credit):
    return credit_quality({k: np.array(v, dtype=float)[:, None, :] for k, v in credit.items()}, READ, INSTANCES,
                          FAMILIES, [4, 4])


def test_uniform_credit_is_one_and_ranks_nothing():
    s = table(uniform=[[2, 2, 2, 2], [-0.5, -0.5, -0.5, -0.5]])["pooled"]["uniform"]
    assert s["concentration"] == 1.0 and s["rank_corr"] == 0.0 and s["n"] == 2
    assert s["dist_pct"] == s["tok_pct"] == pytest.approx(37.5)  # (2/4 + 1/4) / 2


def test_credit_on_the_read_tokens_by_hand():
    # the oracle's weights at beta 0.5: 1.5 on the two read tokens of four, 2.5 on the one read token
    result = table(oracle=[[1.5, 1.5, 0.5, 0.5], [0.5, 0.5, 0.5, 2.5]], away=[[0, 0, 1, 1], [1, 1, 1, 0]])
    oracle, away = result["pooled"]["oracle"], result["pooled"]["away"]
    assert oracle["dist_pct"] == pytest.approx(100 * (0.75 + 0.625) / 2)
    assert oracle["concentration"] == pytest.approx(((0.75 + 0.625) / 2) / 0.375)
    assert oracle["rank_corr"] == pytest.approx(1.0)
    assert away["concentration"] == 0.0 and away["rank_corr"] == pytest.approx(-1.0)
    assert result["by_family"]["b"]["oracle"]["concentration"] == pytest.approx(0.625 / 0.25)
    assert result["by_family"]["a"]["instances"] == 1


def test_an_instance_without_credit_is_left_out_and_counted():
    s = table(none=[[0, 0, 0, 0], [1, 1, 1, 1]])["pooled"]["none"]
    assert s["n"] == 1 and s["without_credit"] == 1 and s["concentration"] == 1.0


def test_no_instance_gives_dashes_and_a_figure_that_says_so(tmp_path):
    from harness.credit.quality import figure

    result = credit_quality({"gdpo": np.ones((1, 1, 3))}, np.zeros((1, 1, 3), bool), np.zeros((1, 1), bool),
                            [["a"]], [3])
    assert result["pooled"]["gdpo"] == {"n": 0, "concentration": None, "dist_pct": None, "tok_pct": None,
                                        "rank_corr": None, "without_credit": 0}
    assert "| gdpo | \u2013 |" in markdown(result, "h")
    figure(result, tmp_path / "f.png", "t")
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("profile, read, expected", [
    ([3.0, 1.0, 2.0], [1, 0, 0], 0.866025), ([1.0, 1.0, 1.0], [1, 0, 0], 0.0), ([1.0, 2.0], [1, 1], 0.0),
    ([1.0, 2.0, 3.0, 4.0], [0, 0, 1, 1], 0.894427)])
def test_rank_correlation_table(profile, read, expected):
    assert rank_correlation(np.array(profile), np.array(read, dtype=bool)) == pytest.approx(expected, abs=1e-6)


def test_markdown_and_csv_hold_every_method_and_family():
    result = table(gdpo=[[1, 1, 1, 1], [1, 1, 1, 1]], oracle=[[1.5, 1.5, 0.5, 0.5], [0.5, 0.5, 0.5, 2.5]])
    md = markdown(result, "heading")
    assert "| gdpo | 1.00 | 37.5 | 37.5 | 0.000 | 2 |" in md
    assert "| a | 1 | 1.00 | 1.50 |" in md and "| b | 1 | 1.00 | 2.50 |" in md
    lines = csv_text(result).splitlines()
    assert lines[0] == "method,scope,concentration,dist_pct,tok_pct,rank_corr,n,without_credit"
    assert len(lines) == 1 + 2 * 3 and lines[1].startswith("gdpo,all,1.000000,")


# -- mrbench localize --algo on the tiny model ---------------------------------------------------------

ALGOS = ["gdpo", "mrtpo", "mrtpo-oracle", "forking", "forking-summed", "gtpo", "gtpo-summed", "ktae", "ktae-summed",
         "cort"]


@pytest.fixture
def toy():
    toy_task.register()


def _localize(tmp_path, *args):
    out = tmp_path / "loc"
    rc = cli.main(["localize", "--model", "tiny-random", "--dtype", "float32", "--task", "toy", "--max-new-tokens",
                   "16", *args, "--out", str(out)])
    return rc, out


@pytest.mark.usefixtures("one_torch_thread", "toy")
def test_localize_algo_compares_credit_on_one_batch(tmp_path, capsys):
    rc, out = _localize(tmp_path, "--algo", *ALGOS, "--n", "16", "--group-size", "4")
    assert rc == 0
    for name in ("credit_quality.md", "credit_quality.csv", "credit_quality.json", "credit_quality.png",
                 "responses.jsonl"):
        assert (out / name).stat().st_size > 0, name
    result = json.loads((out / "credit_quality.json").read_text())
    pooled = result["pooled"]
    assert result["methods"] == ALGOS and result["counts"]["responses"] == 16 and result["counts"]["groups"] == 4
    assert result["instances"] > 0 and set(result["by_family"]) <= {"format", "letter"}
    assert pooled["gdpo"]["concentration"] == pytest.approx(1.0, abs=1e-9) and pooled["gdpo"]["rank_corr"] == 0.0
    assert pooled["mrtpo-oracle"]["concentration"] > 1.0 and pooled["mrtpo-oracle"]["rank_corr"] > 0.0
    for name in ALGOS:
        assert pooled[name]["n"] + pooled[name]["without_credit"] == result["instances"], name
    rows = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert [r["group"] for r in rows] == [g for g in range(4) for _ in range(4)]
    said = capsys.readouterr().out
    assert "gdpo: credit on the tokens the verifiers read 1.00x uniform" in said
    assert (out / "credit_quality.png").read_bytes()[:4] == b"\x89PNG"
    settings = result["settings"]
    assert settings["step"] == 1000 and set(settings["seconds"]) == {"sampling", "scoring_and_credit"}


@pytest.mark.usefixtures("toy")
@pytest.mark.parametrize("args, message", [
    (["--algo", "gdpo", "opsd"], "--algo opsd: its signal is a loss of its own"),
    (["--algo", "gdpo", "nope"], "unknown algorithm 'nope'"),
    (["--algo", "gdpo", "gdpo"], "--algo names an algorithm twice"),
    (["--algo", "gdpo", "--n", "10"], "--n 10 is not a whole number of groups of --group-size 4"),
    (["--algo", "gdpo", "--group-size", "1", "--n", "4"], "--group-size must be at least 2"),
    (["--group-size", "4"], "--group-size samples groups for --algo's credit; give --algo too"),
    (["--algo", "gdpo", "--responses", "rows.jsonl"], "--responses gives responses without groups"),
])
def test_localize_algo_refusals_are_one_line(tmp_path, capsys, args, message):
    rc, _ = _localize(tmp_path, *args)
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
