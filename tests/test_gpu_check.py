"""bench/gpu_check.py keeps working on CPU with the tiny model (the GPU run is the same script)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_check_runs_on_cpu_with_the_tiny_model():
    proc = subprocess.run([sys.executable, "bench/gpu_check.py", "--device", "cpu", "--model", "tiny-random"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    equality = next(line for line in lines if line.startswith("equality"))
    assert equality.endswith(": ok") and "(P_all, P_k) pairs" in equality
    assert "mrtpo: replay" in proc.stdout and "replayed pairs" in proc.stdout
    assert lines[-1].startswith("ratio ") and float(lines[-1].split()[1]) > 0
