"""The one GPU run of issues 52 and 53 (bench/gpu_all.py: gpu_e2e.py then gpu_step.py) keeps working:
its CPU form runs here, the same code on tiny shapes, so that a change to the engine, the Step or the
CLI breaks it here rather than in the GPU machine's few minutes (``-m slow``: about 2.5 minutes on two
idle cores, so it runs before a GPU session, ``pytest -m slow tests/test_gpu_scripts.py``, not in the
default suite); the bands checker on hand-made figures; and, on a GPU, the CLI cell against the bands
committed for that GPU.

Nothing here is timed: the CPU form's figures are printed, never compared."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import gpu_bands

BANDS = {"measured": {"gpu": "NVIDIA H200", "commit": {"commit": "abcdef123456", "dirty": False}},
         "bands": gpu_bands.make_bands({"time_generate": 1.0, "time_update": 0.02, "peak_memory_mb": 1000.0,
                                        "generated_tokens_per_s": 300.0})}


def test_bands_are_the_measured_figures_with_their_margins():
    bands = BANDS["bands"]
    assert bands["time_generate"] == {"measured": 1.0, "max": 1.55, "unit": "s/step"}  # x1.5 + 0.05 s
    assert bands["time_update"]["max"] == 0.08  # a short phase keeps its absolute slack
    assert bands["peak_memory_mb"]["max"] == 1164.0  # x1.1 + 64 MB
    assert bands["generated_tokens_per_s"]["min"] == 200.0  # / 1.5


@pytest.mark.parametrize("figures, expected", [
    ({"time_generate": 1.5, "time_update": 0.08, "peak_memory_mb": 1164.0, "generated_tokens_per_s": 200.0}, []),
    ({"time_generate": 1.6, "time_update": 0.01, "peak_memory_mb": 900.0, "generated_tokens_per_s": 400.0},
     ["time_generate 1.6 s/step above its ceiling 1.55 (measured 1.0 on NVIDIA H200 at abcdef123)"]),
    ({"time_generate": 1.0, "time_update": 0.02, "peak_memory_mb": 1200.0, "generated_tokens_per_s": 150.0},
     ["peak_memory_mb 1200 MB above its ceiling 1164", "generated_tokens_per_s 150 tokens/s below its floor 200"]),
    ({"time_generate": 1.0, "peak_memory_mb": 10.0, "generated_tokens_per_s": 300.0},
     ["time_update: not measured by this run"]),
])
def test_check_names_every_figure_outside_its_band(figures, expected):
    problems = gpu_bands.check(BANDS, figures)
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problem


def test_observe_takes_the_median_of_the_steps_after_the_first():
    rows = [{"step": 1, "time_generate": 9.0, "time_step": 20.0, "response_length": 10.0},
            {"step": 2, "time_generate": 1.0, "time_step": 2.0, "response_length": 10.0},
            {"step": 3, "time_generate": 3.0, "time_step": 4.0, "response_length": 20.0},
            {"step": 4, "time_generate": 2.0, "time_step": 3.0, "response_length": 30.0}]
    figures = gpu_bands.observe(rows, 2**30, responses=4)
    assert figures["time_generate"] == 2.0 and figures["time_step"] == 3.0
    assert figures["generated_tokens_per_s"] == pytest.approx(4 * (10 + 20 + 30) / 6.0)
    assert figures["peak_memory_mb"] == 1024.0
    assert "time_replay" not in figures  # not in the rows: not banded


@pytest.mark.slow  # 156 s on an idle two-core host, the longest test of the default suite it was in
def test_the_gpu_run_in_its_cpu_form_checks_every_part_and_extrapolates_by_counting(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "bench/gpu_all.py", "--device", "cpu", "--seconds", "1200",
                           "--e2e-seconds", "800", "--tokenizer", "byte", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1300, check=False)
    text = proc.stdout
    assert proc.returncode == 0, text[-6000:] + proc.stderr[-3000:]
    # issue 53: one algorithm per replay kind, one a composite, against the CPU in float32 and bf16
    assert "agreement: 18 of 18 within tolerance" in text
    assert re.search(r"cell B: SIGTERM after [12] step\(s\): status 130; resumed run status 0; rows against A: "
                     r"identical; record: complete", text), text[-4000:]
    assert "mrbench eval ifollow-heldout --model B/model: status 0, summary.json written" in text
    assert re.search(r"mrbench verify A --steps 2: status 0: reproduces", text)
    bands = gpu_bands.read(out / "cell-bands-cpu.json")
    assert set(bands["bands"]) >= {"time_generate", "time_update", "time_step", "generated_tokens_per_s"}
    assert bands["run"]["steps"] == 3
    # issue 52: both recipes' slices measured, and their full steps counted from the recipes' batches
    table = (out / "step-table.md").read_text()
    assert "| toolcall-paper | tiny-qwen2 | 2048 (32, 512, 4) |" in table  # 512 x 4: 32 chunks of 64, ...
    assert "| ifollow-paper | tiny-qwen2 | 512 (8, 128, 2) |" in table  # 64 x 8: 8 chunks, 128 micro-batches
    step = json.loads((out / "step.json").read_text())
    for recipe in step["recipes"]:
        assert recipe["replay_forced"]["pairs"] > 0 and recipe["updates"]["float32"]["mini_batches"] == \
            recipe["full"]["mini_batches"]
        assert 1.0 < recipe["extrapolated"]["steps"]["float32"]["ratio"]  # the replay adds to the step
    assert "gpu_all: gpu_e2e status 0, gpu_step status 0" in text
    assert (out / "gpu_all.log").read_text().count("gpu_step on cpu") == 1


def _committed_bands(gpu: str) -> Path | None:
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    path = ROOT / "bench" / "bands" / f"cell-bands-{slug}.json"
    return path if path.exists() else None


def test_the_cell_stays_within_the_bands_committed_for_this_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: the bands are seconds, memory and tokens per second measured on one "
                    "(bench/bands/); the CPU form above runs the same cell")
    gpu = torch.cuda.get_device_name(0)
    bands = _committed_bands(gpu)
    if bands is None:
        pytest.skip(f"no bands committed for {gpu} in bench/bands/ (bench/gpu_e2e.py writes them on that GPU)")
    proc = subprocess.run([sys.executable, "bench/gpu_e2e.py", "--sections", "band-check", "--bands", str(bands),
                           "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "within bands" in proc.stdout
