"""Resumable training state: one ``state.pt`` file under the record's ``checkpoint/`` directory.

Contents: ``step`` (completed training steps), the trainable weights (the full state dict, or the
LoRA adapter's parameters only), the optimiser state (left out of a run's final checkpoint), the RNG states (python, numpy, torch CPU
and CUDA), the data position (index of the next training example) and a fingerprint of the
config. The file is written to a temporary name and renamed, so a kill at any moment leaves
either the previous checkpoint or the new one, never a torn file. It is written without the zip
archive's CRC-32 checksums: the rename already rules out a torn file, and computing them took
about half of the write of a 135M model's 1.6 GB state (the main job writes one after every step).
The local backend renames in a thread (:class:`Renaming`) while the next step runs: on ext4 a rename
over an existing file first allocates the new file's delayed blocks and starts their writeback (ext4's
guard against a power loss leaving the new name on an empty file), which took about 0.6 s per 1.6 GB checkpoint
on a two-core host, nearly all of it waiting on the disk, not the CPU; the next save, a signal's stop
and the end of the run wait for it.
The temporary file of a killed write (``.state.pt.tmp-<pid>``) is removed by the next :func:`load`
(the record's lock keeps any other writer out); a write that fails for want of room is one
:class:`~harness.disk_full.DiskFull` line naming the file and the bytes needed. Beside it, ``step.json`` (``{"step": N}``, written after the rename) says how
far the checkpoint goes without loading it (``mrbench sweep --status``); after a kill between the
two writes it lags one checkpoint behind, never ahead.

The file holds tensors and plain types only (the numpy RNG state as a list of ints), and it is
read with ``torch.load(weights_only=True)``: a ``state.pt`` planted in a record cannot run code
on resume. A checkpoint that would need any other global to load is refused in one line naming
the file and those globals. Checkpoints of earlier releases, which kept the numpy RNG state as an
array, still load: numpy's array and dtype reconstructors are the only globals allowed for them.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.disk_full import guard, tensor_bytes
from harness.records import CHECKPOINT_STEP_FILE as STEP_FILE
from harness.records import RecordError, link_refusal

STATE_FILE = "state.pt"


class CheckpointError(RecordError):
    """A checkpoint that cannot be read; the message names the file and what to do."""


def rng_state() -> dict[str, Any]:
    """The RNG states as tensors and plain types (loadable with ``weights_only=True``)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {"python": random.getstate(),
                             "numpy": [str(name), [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(tuple(state["python"]))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def trainable_state(model: Any) -> dict[str, torch.Tensor]:
    """The weights a resume needs: the adapter's for a peft model, else every parameter and buffer."""
    if hasattr(model, "peft_config"):
        from peft import get_peft_model_state_dict

        return {k: v.detach().cpu() for k, v in get_peft_model_state_dict(model).items()}
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def load_trainable_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    if hasattr(model, "peft_config"):
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, state)
    else:
        model.load_state_dict(state)


def save(directory: Path, *, step: int, model: Any, optimizer: torch.optim.Optimizer | None, data_position: int,
         fingerprint: str) -> Path:
    """Write the checkpoint; ``optimizer=None`` leaves the optimiser state out (a run's final
    checkpoint, from which no update follows)."""
    return write(directory, step=step, model=model, optimizer=optimizer, data_position=data_position,
                 fingerprint=fingerprint).finish()


@dataclass(frozen=True)
class Written:
    """A checkpoint written to its temporary file, not yet in place: :meth:`finish` renames it over
    ``state.pt`` and then records its step in ``step.json``."""

    tmp: Path
    path: Path
    step: int

    def finish(self) -> Path:
        try:
            os.replace(self.tmp, self.path)
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
        from mrbench_core.jsonio import atomic_write_json

        atomic_write_json(self.path.parent / STEP_FILE, {"step": self.step})
        return self.path


class Renaming:
    """:meth:`Written.finish` in a thread; :meth:`wait` blocks until it is done and raises what it
    raised. The thread is not a daemon: an interpreter that exits on an error still finishes the
    rename (a kill leaves the previous checkpoint and a temporary file that :func:`load` removes)."""

    def __init__(self, written: Written):
        self.written, self.error = written, None
        self.thread = threading.Thread(target=self._finish, name=f"mrbench-checkpoint-{written.step}")
        self.thread.start()

    def _finish(self) -> None:
        try:
            self.written.finish()
        except BaseException as exc:  # re-raised by wait(), in the thread that asked
            self.error = exc

    def wait(self) -> Path:
        """The checkpoint's path once it is in place. A Ctrl-C while waiting still waits for the rename
        (about 0.6 s per 1.6 GB checkpoint, measured) and is raised after it, so the thread is done
        whenever this returns or raises and the record is never unlocked with a rename pending."""
        interrupted: KeyboardInterrupt | None = None
        while self.thread.is_alive():
            try:
                self.thread.join()
            except KeyboardInterrupt as exc:
                interrupted = exc
        if interrupted is not None:
            raise interrupted
        if self.error is not None:
            raise self.error
        return self.written.path


def write(directory: Path, *, step: int, model: Any, optimizer: torch.optim.Optimizer | None, data_position: int,
          fingerprint: str) -> Written:
    """The checkpoint's bytes in its temporary file (:func:`save` without the rename)."""
    directory = Path(directory)
    if directory.is_symlink():
        raise CheckpointError(link_refusal(directory))
    directory.mkdir(parents=True, exist_ok=True)
    payload = {"step": step, "model": trainable_state(model), "rng": rng_state(), "data_position": data_position,
               "fingerprint": fingerprint}
    if optimizer is not None:
        payload["optimizer"] = optimizer.state_dict()
    path = directory / STATE_FILE
    tmp = directory / f".{STATE_FILE}.tmp-{os.getpid()}"
    with guard(path, tensor_bytes(payload), f"the checkpoint after step {step}"):
        try:
            with _without_crc():
                torch.save(payload, tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return Written(tmp, path, step)


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Delete the temporary files of killed checkpoint writes (call with the record's lock held)."""
    removed = []
    for tmp in Path(directory).glob(f".{STATE_FILE}.tmp-*"):
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


@contextlib.contextmanager
def _without_crc() -> Iterator[None]:
    """torch.save without the zip CRC-32 checksums (where this torch release can turn them off)."""
    try:
        from torch.utils.serialization import config
    except ImportError:
        yield
        return
    before = config.save.compute_crc32
    config.save.compute_crc32 = False
    try:
        yield
    finally:
        config.save.compute_crc32 = before


# Globals an earlier release's checkpoint needs (its numpy RNG state was an array): numpy's array
# and dtype reconstructors, which build data and call nothing else.
OLD_NUMPY_GLOBALS = ("numpy.dtype", "numpy.ndarray", "numpy.core.multiarray._reconstruct",
                     "numpy._core.multiarray._reconstruct")


def _load_without_code(path: Path) -> Any:
    """``torch.load(weights_only=True)``; a checkpoint of an earlier release also with numpy's
    array globals allowed; any other global refused (:class:`CheckpointError`) before it is built."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(str(path))
    others = [n for n in names if n not in OLD_NUMPY_GLOBALS and not n.startswith("numpy.dtypes.")]
    if others:
        raise CheckpointError(f"{path}: refused: the checkpoint would run code to load "
                              f"({', '.join(sorted(others))}), which mrbench never does; it is not a checkpoint "
                              f"this harness wrote; remove {path.parent} to restart the run from step 0")
    dtypes = [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith("DType")]  # built on the way
    with torch.serialization.safe_globals([_resolve(n) for n in names] + dtypes):
        return torch.load(path, map_location="cpu", weights_only=True)


def _resolve(name: str) -> Any:
    import importlib

    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def load(directory: Path) -> dict[str, Any] | None:
    """The saved state, or None when there is no checkpoint; :class:`CheckpointError` (one line
    naming the file) when it cannot be read, is reached through a symbolic link, or holds a
    ``step`` or data position that is not a count. Leftovers of killed writes are removed first."""
    path = Path(directory) / STATE_FILE
    for linked in (Path(directory), path):
        if linked.is_symlink():
            raise CheckpointError(link_refusal(linked))
    remove_stale_temporaries(path.parent)
    if not path.exists():
        return None
    try:
        state = _load_without_code(path)
    except CheckpointError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: unreadable checkpoint ({path.stat().st_size} bytes; {first}); "
                              f"remove {path.parent} to restart the run from step 0") from exc
    if not isinstance(state, dict) or not {"step", "model", "rng"} <= set(state):
        raise CheckpointError(f"{path}: not a mrbench checkpoint (no step, model and rng); "
                              f"remove {path.parent} to restart the run from step 0")
    for key in ("step", "data_position"):
        value = state.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise CheckpointError(f"{path}: not a mrbench checkpoint ({key} is {value!r}, not a count); "
                                  f"remove {path.parent} to restart the run from step 0")
    return state


def check_resumable(state: dict[str, Any], directory: Path, fingerprints: list[str], steps: int) -> None:
    """Refuse (:class:`CheckpointError`, one line) a loaded checkpoint that another configuration
    wrote than the record's ``config.json`` (``fingerprints``: the ones it accepts), or that goes
    past the run's ``steps``."""
    if state.get("fingerprint") not in fingerprints:
        raise CheckpointError(f"{directory}: a checkpoint of another configuration than the record's config.json "
                              f"(config.json was edited, or the record moved, after it was written); put "
                              f"config.json back as it was and rerun with its settings, or remove {directory} "
                              f"to restart the run from step 0")
    if state["step"] > steps:
        raise CheckpointError(f"{directory}: a checkpoint after step {state['step']} of a {steps}-step run; "
                              f"remove it to restart the run from step 0")
