"""The ray executor on a real local Ray instance (two CPUs): the tiny 2 x 2 grid runs to completion,
each cell as a Ray task holding one CPU and running the cell with that many threads."""

from __future__ import annotations

import json

import pytest
from sweep_fixtures import cell_dirs, status_of, write_grid

from harness import cli

ray = pytest.importorskip("ray", reason="Ray is installed by scripts/setup.sh --dev (the 'ray' extra)")
pytestmark = pytest.mark.engine


def test_ray_sweep_runs_the_grid_on_a_local_ray_instance(tmp_path):
    grid = write_grid(tmp_path, name="onray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources()["CPU"] == 2
        assert cli.main(["sweep", str(grid), "--executor", "ray"]) == 0
        assert ray.is_initialized()  # an instance the caller started is left to the caller
    finally:
        ray.shutdown()
    dirs = cell_dirs(tmp_path / "onray")
    assert len(dirs) == 4 and all(status_of(d) == "finished" for d in dirs)
    for d in dirs:
        assert json.loads((d / "config.json").read_text())["backend"]["local"]["threads"] == 1  # = num_cpus
        assert "record:" in (d / "cell.log").read_text()  # the run's own summary, written by the subprocess
    log = json.loads((tmp_path / "onray" / "sweep.json").read_text())
    assert log["executor"] == "ray" and all(c["attempts"] == 1 for c in log["cells"].values())
