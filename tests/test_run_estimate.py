"""The run's own time estimate (harness/run_estimate.py), from steps timed on the spot: checked on
deterministic step times, including MRTPO's warm-up, whose first steps replay nothing."""

from __future__ import annotations

import pytest

from harness.run_estimate import RunClock, remaining_time


class WarmUp:
    """An algorithm whose beta is 0 for its first two steps (0-based 0 and 1), then positive."""

    def effective_beta(self, n):
        return 0.0 if n < 1 else 0.5


def _row(step, total, replay=0.0, pairs=0):
    return {"step": step, "time_step": total, "time_replay": replay, "replay_pairs": pairs}


def test_by_hand_with_a_replaying_step_timed():
    rows = [_row(1, 40.0), _row(2, 80.0, replay=30.0, pairs=12)]
    found = remaining_time(rows, 4, lambda n: n >= 1)
    # base (step minus replay): (40 + 50) / 2 = 45; steps 2 and 3 replay: + 30 each
    assert found.remaining_seconds == pytest.approx(2 * (45 + 30))
    assert found.total_seconds == pytest.approx(120 + 150) and not found.lower_bound


def test_before_any_replay_is_timed_the_estimate_is_a_lower_bound():
    found = remaining_time([_row(1, 40.0)], 4, lambda n: n >= 1)
    assert found.remaining_seconds == pytest.approx(3 * 40.0) and found.lower_bound
    assert "at least" in found.describe() and "no replaying step timed yet" in found.describe()


def test_the_clock_speaks_after_step_one_and_after_the_first_replay_only():
    said = []
    clock = RunClock(6, WarmUp(), say=said.append)
    rows = []
    for step, (total, replay, pairs) in enumerate([(40, 0, 0), (80, 30, 12), (82, 31, 10), (79, 29, 9), (81, 30, 11)],
                                                  start=1):
        rows.append(_row(step, float(total), float(replay), pairs))
        clock.after_step(rows)
    assert len(said) == 2 and "after step 1" in said[0] and "after step 2" in said[1]
    estimates = clock.summary()["time_estimates"]
    assert [e["after_step"] for e in estimates] == [1, 2]
    assert estimates[0]["lower_bound"] and not estimates[1]["lower_bound"]
    # after step 2: 120 s done + 4 steps x (45 + 30) = 420 s; the steps as timed add up to 362 + 81
    measured = 40 + 80 + 82 + 79 + 81 + 80
    assert estimates[1]["expected_train_seconds"] == pytest.approx(420.0)
    assert 1 / 1.5 <= estimates[1]["expected_train_seconds"] / measured <= 1.5


def test_a_resumed_run_counts_its_own_session():
    said = []
    clock = RunClock(4, WarmUp(), start=2, say=said.append)
    clock.after_step([_row(3, 80.0, 30.0, 10)])
    assert clock.estimates[0].remaining_steps == 1 and not clock.estimates[0].lower_bound


def test_a_run_without_replay_is_never_a_lower_bound():
    class Plain:
        replay_request = "none"

    clock = RunClock(3, Plain(), say=None)
    clock.after_step([_row(1, 10.0)])
    assert clock.estimates[0].remaining_seconds == pytest.approx(20.0) and not clock.estimates[0].lower_bound


def test_a_training_run_records_its_measured_estimates(tmp_path):
    import toy_task
    from toy_task import tiny_config, train_run

    toy_task.register()
    _, _, summary = train_run(tiny_config(str(tmp_path / "rec"), steps=3))
    assert summary["time_estimates"][0]["after_step"] == 1
    assert summary["time_estimates"][0]["expected_train_seconds"] > 0


def test_the_time_before_the_first_step_counts():
    found = remaining_time([_row(1, 40.0)], 2, lambda n: False, elapsed=70.0)  # 30 s of loading
    assert found.total_seconds == pytest.approx(110.0)


@pytest.mark.parametrize("name, replays", [("gdpo", False), ("cort", True), ("sdpo", True), ("ktae", False),
                                           ("forking", False), ("gtpo-summed", False)])
def test_only_requests_that_run_forward_passes_count_as_replaying(name, replays):
    from algorithms import get_algorithm
    from harness.run_estimate import replay_schedule

    assert replay_schedule(get_algorithm(name))(3) is replays  # token ids need none; the sampler gives the entropy
