"""``mrbench`` itself (:func:`harness.cli.main`), with what the GPU cell measures around it:

    python bench/gpu_cli.py [--peak-file FILE] [--deterministic] -- run --model ... (any mrbench command)

- ``--peak-file``: at exit, the process's peak CUDA memory (``torch.cuda.max_memory_allocated`` and
  ``max_memory_reserved``, bytes, JSON) is written there (nothing is written where CUDA never ran);
- ``--deterministic``: ``torch.use_deterministic_algorithms(True, warn_only=True)`` before the
  command, with ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (cuBLAS's deterministic workspace, set before
  CUDA starts): kernels with a deterministic variant use it, and each kernel without one says so
  once in a warning ("... does not have a deterministic implementation ..."), which names it.

Nothing else changes: the arguments after ``--`` are the command's, exactly as ``mrbench`` takes them.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print("usage: gpu_cli.py [--peak-file FILE] [--deterministic] -- MRBENCH-ARGS", file=sys.stderr)
        return 2
    split = argv.index("--")
    ours, command = argv[:split], argv[split + 1:]
    peak_file = ours[ours.index("--peak-file") + 1] if "--peak-file" in ours else None
    if "--deterministic" in ours:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    import torch

    if "--deterministic" in ours:
        torch.use_deterministic_algorithms(True, warn_only=True)
    if peak_file:
        def write_peak() -> None:
            if torch.cuda.is_available() and torch.cuda.is_initialized():
                Path(peak_file).write_text(json.dumps({"allocated": torch.cuda.max_memory_allocated(),
                                                       "reserved": torch.cuda.max_memory_reserved()}))
        atexit.register(write_peak)
    from harness.cli import main as mrbench

    return mrbench(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
