"""Tiny training runs shared by the tests that only read them (not a test module itself).

The ``trained`` fixture of tests/conftest.py hands out :class:`TrainedRun` objects from one
:class:`TrainedRuns` per test process: each distinct configuration of :func:`toy_task.tiny_config`
(algorithm, steps, overrides) is trained once, on the toy task, with one torch thread, finished
(``train_run(..., finish=True)``), the first time a test asks for it. Training is deterministic
(the config's seed), so a test sees the record it would have trained itself.

The record is shared: a test reads it (``path``, ``record``, ``backend``) and copies it
(:meth:`TrainedRun.copy_to`) before writing anything. Each hand-out, and the end of the session,
checks that no file of the record changed since it was trained, and fails naming the file.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _fingerprint(path: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, modification time in ns) of every file under ``path``."""
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(path.rglob("*")) if p.is_file()}


@dataclass
class TrainedRun:
    """One finished tiny run: its config, local backend (policy, tokenizer, ``eos``), record and summary.
    Read-only: copy the record (:meth:`copy_to`) before writing into it."""

    key: str
    cfg: Any
    backend: Any
    record: Any
    summary: dict[str, Any]
    fingerprint: dict[str, tuple[int, int]]

    @property
    def path(self) -> Path:
        return Path(self.record.path)

    def copy_to(self, target: Path) -> Path:
        """A private copy of the record's directory at ``target`` (which must not exist); returns it."""
        shutil.copytree(self.path, target)
        return Path(target)

    def changed(self) -> list[str]:
        """The files written, added or removed since training (empty while the record is untouched)."""
        now = _fingerprint(self.path)
        return sorted(name for name in set(now) | set(self.fingerprint) if now.get(name) != self.fingerprint.get(name))

    def check_untouched(self) -> None:
        changed = self.changed()
        if changed:
            raise AssertionError(f"a test wrote into the shared tiny run {self.key} ({', '.join(changed)}): "
                                 f"copy it with TrainedRun.copy_to(tmp_path) before writing")


def run_key(algo: str, steps: int, overrides: dict[str, Any]) -> str:
    return json.dumps([algo, steps, sorted(overrides.items())], default=repr)


class TrainedRuns:
    """The runs trained so far in this process, by configuration; each trained under ``root`` once."""

    def __init__(self, root: Path):
        self.root = root
        self.runs: dict[str, TrainedRun] = {}

    def get(self, algo: str = "mrtpo", steps: int = 2, **overrides: Any) -> TrainedRun:
        """The finished run of ``toy_task.tiny_config(dir, algo, steps, **overrides)`` on the toy task."""
        key = run_key(algo, steps, overrides)
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = self._train(key, algo, steps, overrides)
        run.check_untouched()
        return run

    def _train(self, key: str, algo: str, steps: int, overrides: dict[str, Any]) -> TrainedRun:
        import torch
        from toy_task import ToyTask, tiny_config, train_run

        cfg = tiny_config(str(self.root / f"run{len(self.runs)}"), algo, steps=steps, **overrides)
        before = torch.get_num_threads()
        torch.set_num_threads(1)  # as the modules that train do (torch_fixtures.one_torch_thread)
        try:
            backend, record, summary = train_run(cfg, task=ToyTask(), finish=True)
        finally:
            torch.set_num_threads(before)
        return TrainedRun(key, cfg, backend, record, summary, _fingerprint(Path(record.path)))

    def check_all_untouched(self) -> None:
        for run in self.runs.values():
            run.check_untouched()
