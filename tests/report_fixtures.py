"""A base record (the untrained model's evaluation) written by hand for report tests, as
``mrbench run --base-model`` writes one here: its config identity, a finished provenance with this
checkout's commit, versions and numerics block, and one ``ifollow-heldout`` number."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.base_model import base_identity, base_record_dir
from harness.numerics import completed
from harness.records import git_commit, library_versions
from mrbench_core.jsonio import atomic_write_json


def write_base_record(root: Path, config: dict[str, Any], instruction_level: float) -> Path:
    """The base record of ``config`` (a run's config dict) under ``root``, scoring ``instruction_level``."""
    path = base_record_dir(root, config)
    path.mkdir(parents=True)
    atomic_write_json(path / "config.json", base_identity(config))
    git, versions = git_commit(), library_versions()
    atomic_write_json(path / "provenance.json", {"status": "finished", "record": "base", "git": git,
                                                 "versions": versions, "numerics": completed(None, git, versions)})
    atomic_write_json(path / "eval.json", {"benchmarks": {"ifollow-heldout": {"summary": {
        "instruction_level": instruction_level}, "cases": 4}}, "eval_limit": 4})
    return path
