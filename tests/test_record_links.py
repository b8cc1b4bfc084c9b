"""Nothing the harness writes or reads in a record follows a symbolic link out of it (reliability
probe 5, K4, K5, K6): a ``.lock``, a ``checkpoint/`` or a ``checkpoint/state.pt`` that is a link is
refused in one line naming it, before anything is written, and the file it points to is left as
it was. A checkpoint that is not a mrbench checkpoint (K4's text file, K9's crafted ``step``) or
one of another configuration than the record's ``config.json`` (K8) is one line too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness.backends import checkpoint
from harness.config import resolve
from harness.records import RecordError, RunRecord, lock_held
from harness.runner import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")
VICTIM_TEXT = "precious lock victim\n"


def _cfg(rec: Path, steps: int = 2, lr: str | None = None):
    pairs = [("model.name", "tiny-random"), ("model.dtype", "float32"), ("schedule.steps", str(steps)),
             ("sampling.prompts_per_step", "1"), ("sampling.group_size", "2"), ("sampling.max_new_tokens", "4"),
             ("schedule.eval_limit", "1"), ("output.dir", str(rec))]
    if lr is not None:
        pairs.append(("optim.lr", lr))
    return resolve(None, pairs)


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_lock_linked_to_another_file_is_refused_and_the_file_is_untouched(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / ".lock").symlink_to(victim)
    assert run(_cfg(rec)) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{rec / '.lock'}: is a symbolic link" in line and "remove the link" in line
    assert victim.read_text() == VICTIM_TEXT
    assert not (rec / "metrics.jsonl").exists()
    assert lock_held(rec) is False  # the probe does not follow the link either


def test_a_linked_checkpoint_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / "checkpoint").symlink_to(elsewhere, target_is_directory=True)
    assert run(_cfg(rec)) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{rec / 'checkpoint'}: is a symbolic link" in line
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert (rec / "checkpoint").is_symlink()  # left for the user to look at


def test_a_state_file_linked_to_a_system_file_is_refused(tmp_path, capsys):
    system_file = tmp_path / "passwd"
    system_file.write_text("root:x:0:0:root:/root:/bin/bash\n")
    rec = tmp_path / "rec"
    (rec / "checkpoint").mkdir(parents=True)
    (rec / "checkpoint" / "state.pt").symlink_to(system_file)
    assert run(_cfg(rec)) == 2
    assert f"{rec / 'checkpoint' / 'state.pt'}: is a symbolic link" in _one_line(capsys.readouterr().err)
    with pytest.raises(checkpoint.CheckpointError, match="is a symbolic link"):
        checkpoint.load(rec / "checkpoint")


def test_every_link_in_a_record_is_refused_when_it_is_locked(tmp_path):
    rec = RunRecord(tmp_path / "rec")
    rec.path.mkdir()
    (rec.path / "metrics.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(RecordError, match="metrics.jsonl: is a symbolic link"):
        rec.lock()
    assert not lock_held(rec.path) and not (rec.path / ".lock").exists()


@pytest.mark.parametrize("text", ["root:x:0:0:root:/root:/bin/bash\n", "(]\n", "\x80\x02]q\x00.", ""])
def test_a_state_file_that_is_no_checkpoint_is_one_line(tmp_path, text):
    (tmp_path / "state.pt").write_bytes(text.encode("latin-1"))
    with pytest.raises(checkpoint.CheckpointError) as info:
        checkpoint.load(tmp_path)
    assert "\n" not in str(info.value) and str(info.value).startswith(str(tmp_path / "state.pt"))


@pytest.mark.parametrize("step", ["3; rm -rf", -1, 1.5, True])
def test_a_crafted_step_is_refused(tmp_path, step):
    model = torch.nn.Linear(2, 2)
    checkpoint.save(tmp_path, step=1, model=model, optimizer=None, data_position=1, fingerprint="f")
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    state["step"] = step
    torch.save(state, tmp_path / "state.pt")
    with pytest.raises(checkpoint.CheckpointError, match="not a count"):
        checkpoint.load(tmp_path)


def test_a_step_past_the_run_is_refused():
    state = {"step": 10**12, "fingerprint": "f"}
    with pytest.raises(checkpoint.CheckpointError, match="after step 1000000000000 of a 30-step run"):
        checkpoint.check_resumable(state, Path("ckpt"), ["f"], 30)


def test_a_checkpoint_of_another_configuration_is_one_line(tmp_path, capsys):
    rec = tmp_path / "rec"
    cfg = _cfg(rec, steps=3)
    cfg.schedule.checkpoint_every = 1
    record = RunRecord.open(cfg)
    record.start(seed=0, task_version="1", data_hash="x")
    record.append_metrics({"step": 1, "reward_mean": 0.5})
    model = torch.nn.Linear(2, 2)
    checkpoint.save(record.checkpoint_dir, step=1, model=model, optimizer=torch.optim.AdamW(model.parameters()),
                    data_position=1, fingerprint=record.config_fingerprint())
    record.unlock()
    config = json.loads((rec / "config.json").read_text())  # edited between the kill and the resume
    config["optim"]["lr"] = 2e-5
    (rec / "config.json").write_text(json.dumps(config, indent=2))
    assert run(_cfg(rec, steps=3, lr="2e-5")) == 2
    line = _one_line(capsys.readouterr().err)
    assert "a checkpoint of another configuration than the record's config.json" in line
    assert f"remove {rec / 'checkpoint'}" in line
    assert json.loads((rec / "provenance.json").read_text())["status"] == "failed"
