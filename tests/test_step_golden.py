"""The training step's behaviour pinned on fixed seeds: tiny local runs (``tiny-random`` on the toy
task) must write the ``metrics.jsonl``, ``samples.jsonl`` and ``credit.jsonl`` rows stored under
``tests/data/step_golden/``. They were first written by the commit before the step was written once
(``harness/training/step.py``), so the move changed nothing a run records, and regenerated on purpose
when the local sampler's draw became inverse-CDF sampling (``harness/backends/decode.py``: a seed
draws other tokens from the same distribution) and the update's micro-batches came to hold one
prompt each, run once (``harness/backends/loss.py``: the same gradient up to rounding); with
``torch.multinomial`` as the draw and the earlier micro-batches, the earlier rows reproduce exactly.
Regenerated again when the update came to compute its attention in float32 under bf16 autocast
(``harness/attention.py``'s ``float32_matmul_attention``), to run a group's prompt once across its
micro-batches (``PromptPass``) and to step AdamW with the fused kernel: each the same update up to
rounding.

Compared: every key of every stored row, apart from the ``time_*`` keys (wall-clock seconds, the
one thing that differs between two runs of the same seed); keys a newer step adds are allowed.
Floats agree to 1e-6 relative (the same seed on another CPU's BLAS may round the last bits
differently); everything else exactly.

Rows are kept per device class (:func:`harness.numerics.device_class`, each set's ``device.txt``):
on a host with native bf16 the update runs under bf16 autocast, and two kinds of host round its
products differently (AVX512-BF16 on an AMD EPYC, AMX on an Intel Xeon: the first step's gradient
norm already differs in the fourth digit), so their runs part from the first update on. The first
set (``step_golden/<case>/``) was recorded on an AMD EPYC; others live under
``step_golden/by-device/<name>/``. A host of a class with no set skips, naming its class.

Regenerate (only when a change of behaviour is meant, and say so in the commit; on each kind of
host that has a set)::

    python tests/test_step_golden.py
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).parent / "data" / "step_golden"
#: where the row sets of hosts other than the first set's live, one folder per device class
BY_DEVICE = GOLDEN / "by-device"
FILES = ("metrics.jsonl", "samples.jsonl", "credit.jsonl")
#: run-dependent keys of a metrics row: wall-clock seconds
RUN_DEPENDENT_PREFIXES = ("time_",)

#: name -> (algorithm, steps, overrides of toy_task.tiny_config): MRTPO replays every step (no
#: warm-up) and logs one credit group; GDPO logs two groups without a replay; OPSD replays the
#: teacher (the reference policy) and adds its own loss term; mrtpo-oracle builds read-span masks;
#: MRTPO on ifollow's real data (12 examples, needs ``MRBENCH_DATA_DIR``) names its rewards by the
#: task's reward family (the constraint type).
CASES: dict[str, tuple[str, int, dict[str, Any]]] = {
    "mrtpo": ("mrtpo", 3, {"output__credit_groups": 1}),
    "gdpo": ("gdpo", 2, {"output__credit_groups": 2}),
    "opsd": ("opsd", 2, {"output__credit_groups": 1}),
    "mrtpo-oracle": ("mrtpo-oracle", 2, {"output__credit_groups": 1}),
    "ifollow-mrtpo": ("mrtpo", 3, {"output__credit_groups": 1, "task__name": "ifollow", "task__limit": 12}),
}


def this_device_class() -> str:
    import torch

    from harness.numerics import device_class, device_info

    return device_class(device_info(torch.device("cpu")))


def golden_sets() -> dict[str, Path]:
    """device class -> the folder of the rows recorded on it."""
    sets = {}
    for folder in [GOLDEN, *sorted(BY_DEVICE.glob("*"))]:
        if (folder / "device.txt").exists():
            sets[(folder / "device.txt").read_text().strip()] = folder
    return sets


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_case(name: str, out: Path) -> Path:
    """Train case ``name`` under ``out``; its record's directory."""
    import torch
    from toy_task import ToyTask, tiny_config, train_run

    algo, steps, overrides = CASES[name]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = tiny_config(str(out), algo, steps=steps, **overrides)
        if "task__name" in overrides:  # a registered task, as the backend makes it
            from tasks.registry import make_task

            return train_run(cfg, task=make_task(cfg.task.name, **cfg.task.options))[1].path
        return train_run(cfg, task=ToyTask())[1].path
    finally:
        torch.set_num_threads(before)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or isinstance(a, str) or isinstance(b, str):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def differences(golden: list[dict[str, Any]], new: list[dict[str, Any]], file: str) -> list[str]:
    """What differs between the stored rows and the new ones (empty: the same)."""
    if len(golden) != len(new):
        return [f"{file}: {len(new)} rows, stored {len(golden)}"]
    out = []
    for i, (g, n) in enumerate(zip(golden, new)):
        for key, value in g.items():
            if key.startswith(RUN_DEPENDENT_PREFIXES):
                continue
            if key not in n:
                out.append(f"{file} row {i}: {key!r} missing")
            elif not _same(value, n[key]):
                out.append(f"{file} row {i}: {key!r} is {n[key]!r}, stored {value!r}")
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_tiny_run_records_what_the_commit_before_the_shared_step_recorded(name, tmp_path):
    if "task__name" in CASES[name][2] and not os.environ.get("MRBENCH_DATA_DIR"):
        pytest.skip("MRBENCH_DATA_DIR is not set (the real ifollow data)")
    device, sets = this_device_class(), golden_sets()
    if device not in sets:
        pytest.skip(f"no golden rows recorded on this device class ({device}; recorded: {', '.join(sets)}); "
                    f"`python tests/test_step_golden.py` records them")
    path = run_case(name, tmp_path / name)
    for file in FILES:
        golden = _read(sets[device] / name / file)
        assert golden or file == "credit.jsonl", f"no stored {file} for {name}"
        assert differences(golden, _read(path / file), file) == []


def test_the_comparison_sees_a_changed_value_and_ignores_times_and_new_keys():
    row = {"step": 1, "loss": 0.5, "time_step": 3.0, "rewards": {"a": None}}
    assert differences([row], [{**row, "time_step": 9.0, "new": 1}], "m") == []
    assert differences([row], [{**row, "loss": 0.6}], "m") == ["m row 0: 'loss' is 0.6, stored 0.5"]
    assert differences([row], [{k: v for k, v in row.items() if k != "loss"}], "m") == ["m row 0: 'loss' missing"]
    assert differences([row], [], "m") == ["m: 0 rows, stored 1"]


if __name__ == "__main__":  # regenerate the stored rows
    import shutil
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    import re

    device = this_device_class()
    target = golden_sets().get(device) or BY_DEVICE / re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    target.mkdir(parents=True, exist_ok=True)
    (target / "device.txt").write_text(device + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        for case in sorted(CASES):
            record = run_case(case, Path(tmp) / case)
            (target / case).mkdir(parents=True, exist_ok=True)
            for file in FILES:
                if (record / file).exists():
                    shutil.copyfile(record / file, target / case / file)
            print(case, {f: len(_read(target / case / f)) for f in FILES})
