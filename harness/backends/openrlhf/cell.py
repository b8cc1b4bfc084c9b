"""The files of an openrlhf run and the cell description its OpenRLHF processes read.

Under the record directory:

- ``openrlhf/prompts.jsonl``: the training prompts in the local backend's order, one row per
  prompt drawn (``{"input": rendered prompt, "label": label}``, :mod:`.labels`);
- ``openrlhf/cell.json``: the :class:`CellSpec` (resolved config and record directory), found by
  the OpenRLHF processes through the ``MRBENCH_CELL`` environment variable;
- ``openrlhf/launch.log``: the OpenRLHF process's output;
- ``openrlhf/stop``: written by the mrbench process on SIGTERM/SIGINT; the trainer checkpoints
  after the step it is in and stops;
- ``checkpoint/openrlhf/``: OpenRLHF's DeepSpeed checkpoints (``--ckpt.path``) and the final
  Hugging Face weights (``final_hf``, ``--ckpt.output_dir``); inside ``checkpoint/`` so that the
  runner removes them with the rest of the resume state unless ``output.keep_checkpoint``.

Every OpenRLHF process must see the record directory: on several nodes it lies on shared storage.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrbench_core.jsonio import atomic_write_json

CELL_ENV = "MRBENCH_CELL"
#: the agent file OpenRLHF loads into every vLLM engine (``--train.agent_func_path``)
AGENT_FILE = Path(__file__).resolve().parent / "agent.py"
#: the repository root: on the Python path of every OpenRLHF process
REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class CellPaths:
    record: Path

    @property
    def work(self) -> Path:
        return self.record / "openrlhf"

    @property
    def prompts(self) -> Path:
        return self.work / "prompts.jsonl"

    @property
    def cell(self) -> Path:
        return self.work / "cell.json"

    @property
    def log(self) -> Path:
        return self.work / "launch.log"

    @property
    def stop(self) -> Path:
        return self.work / "stop"

    @property
    def checkpoints(self) -> Path:
        return self.record / "checkpoint" / "openrlhf"

    @property
    def final_weights(self) -> Path:
        return self.checkpoints / "final_hf"


@dataclass
class CellSpec:
    """What the OpenRLHF processes need to know of the cell: its resolved config (as
    ``config.json`` holds it) and where its record is."""

    config: dict[str, Any]
    record_dir: str

    @property
    def cfg(self) -> Any:
        from harness.config import from_dict

        return from_dict(self.config)

    @property
    def paths(self) -> CellPaths:
        return CellPaths(Path(self.record_dir))

    def write(self) -> Path:
        path = self.paths.cell
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {"config": self.config, "record_dir": self.record_dir})
        return path

    @classmethod
    def read(cls, path: str | Path) -> CellSpec:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(config=data["config"], record_dir=data["record_dir"])


def current_cell() -> CellSpec:
    """The cell of this OpenRLHF process (``$MRBENCH_CELL``)."""
    path = os.environ.get(CELL_ENV)
    if not path:
        raise RuntimeError(f"${CELL_ENV} is not set: the mrbench OpenRLHF hooks run only in a process that "
                           f"`mrbench run --backend openrlhf` started")
    return CellSpec.read(path)
