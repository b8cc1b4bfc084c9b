"""An MRTPO-family run whose varying rewards can never be replayed says so (start, summary,
provenance) instead of silently training as GDPO; ``require_relevance`` makes it an error."""

from __future__ import annotations

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import ToyTask, tiny_config, train_run

from harness.records import load_record
from harness.training.relevance_guard import RelevanceUnavailable


class BlocklessToy(ToyTask):
    """The toy task with every verifier block removed: nothing to leave out in a replay."""

    def score(self, example, response):
        verdicts = super().score(example, response)
        for v in verdicts:
            v.block = None
        return verdicts


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(cfg, task):
    return train_run(cfg, task)[2]


def test_blockless_mrtpo_run_warns_and_records(tmp_path, capsys):
    cfg = tiny_config(str(tmp_path / "r"), "mrtpo", steps=2)
    summary = _train(cfg, BlocklessToy())
    err = capsys.readouterr().err
    assert "no verifier block" in err and err.count("mrbench: warning") == 1
    assert summary["steps_without_relevance"] >= 1
    assert "as the aggregator (GDPO)" in load_record(tmp_path / "r")["provenance"]["relevance_warning"]


def test_require_relevance_makes_it_an_error(tmp_path):
    cfg = tiny_config(str(tmp_path / "r"), "mrtpo", steps=1)
    cfg.algo.params["require_relevance"] = True
    with pytest.raises(RelevanceUnavailable, match="require_relevance"):
        _train(cfg, BlocklessToy())


def test_a_task_with_blocks_and_a_response_level_algorithm_are_quiet(tmp_path, capsys):
    summary = _train(tiny_config(str(tmp_path / "a"), "mrtpo", steps=1), ToyTask())
    assert summary["steps_without_relevance"] == 0
    summary = _train(tiny_config(str(tmp_path / "b"), "gdpo", steps=1), BlocklessToy())
    assert "steps_without_relevance" not in summary
    assert "warning" not in capsys.readouterr().err


class SpanlessToy(ToyTask):
    """The toy task whose verifiers report no span read: the oracle has no tokens to credit."""

    def score(self, example, response):
        verdicts = super().score(example, response)
        for v in verdicts:
            v.spans = []
        return verdicts


def test_an_oracle_run_without_read_spans_warns_and_one_with_them_is_quiet(tmp_path, capsys):
    summary = _train(tiny_config(str(tmp_path / "a"), "mrtpo-oracle", steps=2), SpanlessToy())
    err = capsys.readouterr().err
    assert "no verifier reported reading only part of a response" in err and summary["steps_without_relevance"] >= 1
    summary = _train(tiny_config(str(tmp_path / "b"), "mrtpo-oracle", steps=2), ToyTask())
    assert summary["steps_without_relevance"] == 0 and "warning" not in capsys.readouterr().err
