"""Loaded by every Python process whose ``PYTHONPATH`` starts with this folder (the test's Ray
workers, OpenRLHF's driver and actors, vLLM's engine processes). It does nothing unless
``MRBENCH_OPENRLHF_CPU_SHIM=1``; then it installs the CPU patches of :mod:`openrlhf_cpu_shim`.
Test-only: nothing here ships with mrbench."""

import os

if os.environ.get("MRBENCH_OPENRLHF_CPU_SHIM") == "1":
    import openrlhf_cpu_shim

    openrlhf_cpu_shim.install()
