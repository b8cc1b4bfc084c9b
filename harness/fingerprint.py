"""The numerics fingerprint of this code on a device, cached: the probe (:mod:`harness.numerics_probe`)
runs a backend's training step once per (code, device class, library versions, probe version), and
the user's cache directory (:func:`cache_dir`) keeps the result, so a run pays for the probe once
per code change. :func:`harness.numerics.measured` puts what this module finds into a record's
block.

The backend whose step is probed is passed in (the local backend passes itself), so this module,
like the probe, imports no backend.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from harness import numerics_probe
from harness.numerics import device_class, device_info, fingerprint_of, pinned_versions
from harness.records import library_versions as installed_versions

#: the packages whose code the fingerprint depends on (the cache key hashes their sources)
CODE_PACKAGES = ("harness", "algorithms", "mrbench_core", "tasks")
CACHE_ENV = "MRBENCH_NUMERICS_CACHE"


def cache_dir() -> Path:
    """Where fingerprints are cached: ``$MRBENCH_NUMERICS_CACHE``, else the user's cache directory
    (``$XDG_CACHE_HOME`` or ``~/.cache``) under ``mrbench/numerics``; never the repository."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mrbench" / "numerics"


def code_hash() -> str:
    """A hash of the Python sources of :data:`CODE_PACKAGES` as imported (a commit, a dirty tree
    and an installed copy alike)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for package in CODE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def library_versions() -> dict[str, str | None]:
    """The installed versions of the libraries a numerics block names (torch, transformers, vllm)."""
    return pinned_versions(installed_versions())


def probe_fingerprint(device: Any, backend: type) -> dict[str, Any]:
    """The fingerprint of this code on ``device``, probed through ``backend``'s training step:
    ``{"fingerprint", "parts", "probe": {"version", "seconds", "cached"}}``, read from the cache when
    this code, device class and library versions were probed before; else the probe runs and the
    cache keeps it."""
    t0 = time.perf_counter()
    key_text = json.dumps({"code": code_hash(), "device_class": device_class(device_info(device)),
                           "versions": library_versions(), "probe": numerics_probe.PROBE_VERSION}, sort_keys=True)
    path = cache_dir() / (hashlib.sha256(key_text.encode()).hexdigest()[:24] + ".json")
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        return {**stored, "probe": {**stored["probe"], "cached": True,
                                    "seconds": round(time.perf_counter() - t0, 3)}}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    parts = numerics_probe.digests(str(device), backend)
    out = {"fingerprint": fingerprint_of(parts), "parts": parts,
           "probe": {"version": numerics_probe.PROBE_VERSION, "seconds": round(time.perf_counter() - t0, 3),
                     "cached": False}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(out, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs the next run another probe
    return out


def run_fingerprint(device: Any, backend: type) -> dict[str, Any] | None:
    """:func:`probe_fingerprint` for a run on ``device``; None inside the probe's own tiny run (it
    does not probe again: :data:`harness.numerics_probe.PROBING_ENV`)."""
    if os.environ.get(numerics_probe.PROBING_ENV):
        return None
    return probe_fingerprint(device, backend)
