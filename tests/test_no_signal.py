"""The no-learning-signal watch (harness/no_signal.py): when it warns, stops and what it records."""

from __future__ import annotations

import io

import pytest

from harness.config import resolve
from harness.config_types import ConfigError
from harness.no_signal import SignalWatch


def _rows(shares):
    return [{"step": i + 1, "frac_groups_no_signal": s} for i, s in enumerate(shares)]


@pytest.mark.parametrize("shares, steps, warned", [
    ([1.0, 1.0], 2, 2),
    ([1.0, 0.5, 1.0, 1.0], 2, 4),  # a step with signal resets the count
    ([1.0, 1.0, 1.0], 3, 3),
    ([0.9, 1.0], 2, None),
    ([1.0], 1, 1),
])
def test_warns_once_after_n_consecutive_steps(shares, steps, warned):
    out = io.StringIO()
    watch = SignalWatch(steps, out=out)
    assert not any(watch.after_step(r) for r in _rows(shares))
    assert watch.summary()["no_signal_warning_step"] == warned
    assert out.getvalue().count("no learning signal") == (1 if watch.warned_at else 0)


def test_stop_without_signal_stops_at_the_warning_and_records_it():
    watch = SignalWatch(2, stop=True, out=io.StringIO())
    assert [watch.after_step(r) for r in _rows([1.0, 1.0])] == [False, True]
    assert watch.summary() == {"steps_without_signal": 2, "frac_groups_no_signal_mean": 1.0,
                               "no_signal_warning_step": 2, "stopped_without_signal": 2}


def test_a_resumed_run_counts_the_steps_it_already_has_and_does_not_warn_again():
    out = io.StringIO()
    watch = SignalWatch(2, out=out)
    watch.resume(_rows([0.0, 1.0]))
    assert watch.after_step({"step": 3, "frac_groups_no_signal": 1.0}) is False
    assert watch.warned_at == 3 and "steps 2-3" in out.getvalue()


def test_no_signal_steps_is_validated_where_declared():
    with pytest.raises(ConfigError, match="schedule.no_signal_steps: must be >= 1"):
        resolve(None, [("schedule.no_signal_steps", "0")])
