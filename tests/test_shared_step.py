"""Every backend runs the same step object (:class:`harness.training.step.Step`): with ``MRBENCH_STEP_PROBE``
set, the Step appends each phase it runs to a file in the record, and the phases come in the same
order, step after step, on the local backend (tiny-random) and the plugin example's engine. (The
openrlhf backend's check rides on the real CPU run of ``tests/test_openrlhf_cpu_runs.py``.)"""

from __future__ import annotations

import pytest
from test_plugin_examples import canned_run, mrbench_here, site  # noqa: F401  (fixtures)
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import tiny_config, train_run

from harness.training.phases import PROBE_ENV, STEP_PHASES, probe_phases

PROBE_FILE = "step_probe.jsonl"


def expected(steps: int) -> list[tuple[int, str]]:
    return [(n, phase) for n in range(1, steps + 1) for phase in STEP_PHASES]


def test_the_phases_are_the_steps_reading_order():
    assert STEP_PHASES == ("plan", "sample", "score", "replay", "advantages", "credit", "update", "metrics", "samples")


@pytest.mark.usefixtures("one_torch_thread")
def test_the_local_backend_runs_the_shared_step(tmp_path, monkeypatch):
    monkeypatch.setenv(PROBE_ENV, PROBE_FILE)
    rec = train_run(tiny_config(str(tmp_path / "m"), "mrtpo", steps=2))[1]
    assert probe_phases(rec.path / PROBE_FILE) == expected(2)


@pytest.mark.usefixtures("one_torch_thread")
def test_without_the_variable_no_probe_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(PROBE_ENV, raising=False)
    rec = train_run(tiny_config(str(tmp_path / "m"), "gdpo", steps=1))[1]
    assert not (rec.path / PROBE_FILE).exists()


def test_the_plugin_examples_engine_runs_the_shared_step(mrbench_here, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv(PROBE_ENV, PROBE_FILE)
    out = tmp_path / "canned"
    res = mrbench_here(*canned_run(out, steps=2), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert probe_phases(out / PROBE_FILE) == expected(2)
