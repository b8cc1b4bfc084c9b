"""The model export swaps in whole or not at all, ``--model <record>`` takes only a complete
model of a finished run, and leftovers of a killed export go (reliability probe 4, E1 and E2);
model/ is saved in the dtype the run decoded with, which its config and export.json say.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from toy_task import register, tiny_config, train_run

from harness import cli
from harness.backends import export
from harness.backends.export import MANIFEST, record_model_dir, record_model_problem, save_model
from harness.runner import run


@pytest.fixture(scope="module")
def finished(trained):
    """A finished one-step record with its model/ (float32), and its backend: shared, so the tests
    write into copies of it."""
    run = trained("grpo", steps=1)
    return run.backend, run.record


def _copy(rec, tmp_path):
    target = tmp_path / "rec"
    shutil.copytree(rec.path, target)
    return target


def test_a_kill_while_the_old_model_goes_leaves_a_complete_model(finished, tmp_path, monkeypatch):
    backend, rec = finished
    path = _copy(rec, tmp_path)
    before = export.file_hashes(path / "model")
    real_rmtree = shutil.rmtree

    def killed(target, *args, **kwargs):  # the kill lands while the old model/ is being removed
        target = type(path)(target)
        if target.name.startswith((".model.tmp-", ".model.old-")) and (target / "config.json").exists():
            (target / "tokenizer.json").unlink(missing_ok=True)
            raise KeyboardInterrupt("killed")
        return real_rmtree(target, *args, **kwargs)

    monkeypatch.setattr(export.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        save_model(backend.policy, backend.tokenizer, path, eos=list(backend.eos))
    monkeypatch.setattr(export.shutil, "rmtree", real_rmtree)
    assert record_model_problem(path) is None  # model/ is the new export, whole
    assert set(export.file_hashes(path / "model")) == set(before)
    leftovers = export.remove_stale_exports(path)
    assert leftovers and not any(p.exists() for p in leftovers)
    assert sorted(p.name for p in path.iterdir() if p.name.startswith(".model")) == []


def test_a_failed_export_keeps_the_old_model_and_leaves_no_folder(finished, tmp_path, monkeypatch):
    backend, rec = finished
    path = _copy(rec, tmp_path)
    before = export.file_hashes(path / "model")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "_write_full", full)
    with pytest.raises(OSError):
        save_model(backend.policy, backend.tokenizer, path, eos=list(backend.eos))
    assert export.file_hashes(path / "model") == before
    assert not [p for p in path.iterdir() if p.name.startswith(".model.")]


def test_eval_refuses_an_incomplete_model_and_an_unfinished_run_with_the_reason(finished, tmp_path, capsys):
    _, rec = finished
    path = _copy(rec, tmp_path)
    weights = path / "model" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    assert record_model_dir(path) is None
    assert cli.main(["eval", "ifollow-heldout", "--model", str(path), "--limit", "1", "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"model/ is incomplete: model.safetensors has {len(data) // 2} of {len(data)} bytes" in err
    weights.write_bytes(data)
    (path / "model" / "tokenizer.json").unlink()
    assert record_model_problem(path) == "model/ is incomplete: tokenizer.json is missing"
    path2 = _copy(rec, tmp_path / "b")
    prov = json.loads((path2 / "provenance.json").read_text())
    prov["status"] = "running"
    (path2 / "provenance.json").write_text(json.dumps(prov))
    assert record_model_problem(path2) == "its run has not finished (status 'running'); rerun its command to finish it first"


def test_the_next_run_removes_a_dead_exports_folder(tmp_path, capsys):
    register()
    cfg = tiny_config(str(tmp_path / "run"), "grpo", steps=1)
    _, rec, _ = train_run(cfg, finish=True)
    stale = rec.path / ".model.tmp-999999"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"\0" * 1000)
    assert run(cfg) == 0  # a finished run: nothing is trained again, the leftover goes
    assert not stale.exists() and record_model_problem(rec.path) is None


def test_model_is_saved_in_the_dtype_the_run_decoded_with(tmp_path):
    from safetensors import safe_open

    backend, rec, _ = train_run(tiny_config(str(tmp_path / "bf"), "grpo", steps=1, model__dtype="bfloat16"),
                                finish=True)
    model = rec.path / "model"
    assert json.loads((model / MANIFEST).read_text())["dtype"] == "bfloat16"
    config = json.loads((model / "config.json").read_text())
    assert (config.get("dtype") or config.get("torch_dtype")) == "bfloat16"
    assert rec.provenance()["model"]["dtype"] == "bfloat16"
    with safe_open(str(model / "model.safetensors"), "pt") as fh:
        dtypes = {fh.get_tensor(k).dtype for k in fh.keys()}
    assert dtypes == {torch.bfloat16}
    expected = {k: v for k, v in backend.rollout_model.state_dict().items()}
    with safe_open(str(model / "model.safetensors"), "pt") as fh:
        for key in fh.keys():
            assert torch.equal(fh.get_tensor(key), expected[key]), key
