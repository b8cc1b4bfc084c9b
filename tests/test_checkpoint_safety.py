"""A checkpoint loads no pickled code (reliability probe 4, S4): ``state.pt`` is read with
``torch.load(weights_only=True)``; a ``__reduce__`` payload planted in an unfinished record's
checkpoint is refused in one line naming the file, and never runs. The RNG states round-trip as
plain types, and a checkpoint of an earlier release (numpy array in its RNG state) still loads.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness.backends import checkpoint
from harness.config import resolve
from harness.records import RunRecord
from harness.runner import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")
OLD_STOPPED = Path(__file__).parent / "fixtures" / "old_records" / "old-stopped" / "checkpoint"


class Payload:
    """What a hostile ``state.pt`` carries: unpickling it runs ``os.system``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _save(directory: Path) -> None:
    model = torch.nn.Linear(3, 3)
    checkpoint.save(directory, step=1, model=model, optimizer=torch.optim.AdamW(model.parameters()),
                    data_position=1, fingerprint="f")


def _plant(directory: Path, marker: Path) -> None:
    path = directory / "state.pt"
    state = torch.load(path, weights_only=True)
    state["note"] = Payload(marker)
    torch.save(state, path)


def test_a_planted_payload_is_refused_by_name_and_does_not_run(tmp_path):
    directory, marker = tmp_path / "checkpoint", tmp_path / "PWNED"
    _save(directory)
    _plant(directory, marker)
    with pytest.raises(checkpoint.CheckpointError) as info:
        checkpoint.load(directory)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{directory / 'state.pt'}: refused")
    assert "posix.system" in message or "os.system" in message
    assert f"remove {directory}" in message
    assert not marker.exists()


def test_a_resume_from_a_planted_checkpoint_stops_in_one_line(tmp_path, capsys):
    cfg = resolve(None, [("model.name", "tiny-random"), ("model.dtype", "float32"), ("schedule.steps", "2"),
                         ("sampling.prompts_per_step", "1"), ("sampling.group_size", "2"),
                         ("sampling.max_new_tokens", "4"), ("schedule.eval_limit", "1"),
                         ("output.dir", str(tmp_path / "rec"))])
    rec = RunRecord.open(cfg)
    rec.start(seed=0, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward_mean": 0.5})
    rec.unlock()
    marker = tmp_path / "PWNED"
    _save(rec.path / "checkpoint")
    _plant(rec.path / "checkpoint", marker)
    assert run(cfg) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err and "refused" in lines[0], err
    assert not marker.exists()


def test_rng_states_round_trip_as_plain_types(tmp_path):
    random.seed(3), np.random.seed(4), torch.manual_seed(5)
    _save(tmp_path / "c")
    expected = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    state = checkpoint.load(tmp_path / "c")
    assert isinstance(state["rng"]["numpy"][1], list)
    random.seed(0), np.random.seed(0), torch.manual_seed(0)
    checkpoint.set_rng_state(state["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_a_checkpoint_of_an_earlier_release_still_loads(tmp_path):
    state = checkpoint.load(OLD_STOPPED)
    assert state["step"] == 1 and isinstance(state["rng"]["numpy"][1], np.ndarray)
    checkpoint.set_rng_state(state["rng"])
