"""The benchmark scripts bench/README.md quotes for the replay's cost and the step's split
(replay_overhead.py, profile_step.py) keep running on the tiny model: they reach into the local
backend's engine, and a change there would otherwise break them silently until someone measures.
What they print is checked for its form and for the invariants that hold at any size, not for speed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()


def test_replay_overhead_runs_and_replays_the_share_it_was_given():
    lines = _run("bench/replay_overhead.py", "--model", "tiny-random", "--prompts", "2", "--group", "4",
                 "--max-new-tokens", "8", "--shares", "0.25", "0.5", "--repeats", "1", "--threads", "1")
    shares = [float(m.group(1)) for line in lines if (m := re.match(r"share ([\d.]+)%, pooled", line))]
    assert shares == [25.0, 50.0]
    naive = next(line for line in lines if line.startswith("prefix-shared batched replay"))
    shared, full = map(int, re.search(r"tokens through the model: (\d+) vs (\d+)", naive).groups())
    assert 0 < shared < full  # prefix sharing runs fewer tokens than full contexts one at a time
    floors = [line for line in lines if "the exact replay's floor" in line]
    assert len(floors) == 2 and all(re.search(r"take [\d.]+ s = \d+% of the measured replay", f) for f in floors)
    assert lines[-1].startswith("ratio ") and float(lines[-1].split()[1]) >= 1.0  # MRTPO adds work


def test_profile_step_splits_the_training_seconds_by_phase():
    lines = _run("bench/profile_step.py", "--model.name", "tiny-random", "--schedule.steps", "2",
                 "--sampling.max_new_tokens", "8", "--backend.local.threads", "1")
    phases = {m.group(1): float(m.group(3)) for line in lines
              if (m := re.match(r"\s+(generation|generate|score|scoring|replay|credit|update|rest)\s+"
                                r"([\d.]+) s\s+([\d.]+)%", line))}
    assert {"replay", "update", "credit", "rest"} <= set(phases), lines
    assert abs(sum(phases.values()) - 100.0) < 1.0  # the phases' shares of the steps add up
    assert any(line.startswith("roofline (") and "GB/s" in line and "GFLOP/s" in line for line in lines), lines
    table = {m.group(1): m for line in lines
             if (m := re.match(r"\s+(generate|replay|update)\s+(\S+ GB|-)\s+(\S+ s|-)\s+([\d.]+) TF\s+([\d.]+) s\s+"
                               r"([\d.]+) s\s+([\d.]+) s\s+(\S+)", line))}
    assert set(table) == {"generate", "replay", "update"}, lines
    gen = table["generate"]
    assert float(gen.group(2).split()[0]) > 0 and float(gen.group(4)) > 0  # bytes and FLOPs counted
    assert float(gen.group(7)) > 0 and float(gen.group(8).rstrip("x")) > 0  # measured against a floor
    assert any(line.strip().startswith("per decoding pass (") for line in lines)
    assert any(line.strip().startswith("the products of one decoding pass at its ") for line in lines)
    assert lines[-1].startswith("train_seconds ") and float(lines[-1].split()[1]) > 0


def test_the_int8_replay_candidate_reports_agreement_and_speed_ratios():
    lines = _run("bench/replay_int8_agreement.py", "--model", "tiny-random", "--prompts", "2", "--group", "8",
                 "--max-new-tokens", "24", "--speed-rows", "64")
    assert int(re.match(r"exact replay: (\d+) pairs replayed", lines[0]).group(1)) > 0
    pearson = {line.split(":")[0]: [float(v) for v in re.findall(r"Pearson ([\d.]+)", line)]
               for line in lines[1:4]}
    control, int8 = pearson["exact, P_all replayed too (what bf16 moves)"], pearson["int8 decoder, P_all replayed the same way"]
    assert control and min(control) > 0.99  # the same model replaying P_all agrees with sampling's P_all
    assert int8 and all(-1.0 <= v <= 1.0 for v in int8)
    assert sum(line.startswith("[64, ") and "int8 layer" in line for line in lines) >= 4  # every layer shape


def test_cell_speed_runs_a_cell_at_two_commits_alternately_and_prints_their_ratio(tmp_path):
    lines = _run("bench/cell_speed.py", "--old", "HEAD", "--new", "HEAD", "--runs", "1", "--eval-limit", "1",
                 "--threads", "1", "--keep", str(tmp_path), "--model.name", "tiny-random", "--schedule.steps", "1",
                 "--sampling.max_new_tokens", "8")
    runs = [line for line in lines if line.startswith("run 1 ")]
    assert [r.split()[2] for r in runs] == ["old", "new"], lines  # alternated, old first
    assert all(re.search(r"training [\d.]+ s \(generate [\d.]+, replay [\d.]+, update [\d.]+ over 1 steps\)", r)
               for r in runs)
    assert (tmp_path / "old-1" / "metrics.jsonl").is_file() and (tmp_path / "new-1" / "metrics.jsonl").is_file()
    assert not (tmp_path / "tree-old").exists()  # the worktrees are removed
    assert lines[-1].startswith("ratio ") and float(lines[-1].split()[1]) > 0


def test_cell_speed_takes_a_grids_cell_and_names_a_missing_one():
    sys.path.insert(0, str(ROOT / "bench"))
    import cell_speed

    args = cell_speed.cell_overrides("gdpo", "grids/ifollow-smollm2-3.yaml", 0)
    assert args[args.index("--algo.name") + 1] == "gdpo" and args[args.index("--seed") + 1] == "0"
    proc = subprocess.run([sys.executable, "bench/cell_speed.py", "--old", "HEAD", "--new", "HEAD", "--cell", "nosuch"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0 and "has no nosuch cell of seed 0" in proc.stderr


def test_decode_pass_breaks_a_pass_down_and_times_the_attention_candidates():
    lines = _run("bench/decode_pass.py", "--model", "tiny-random", "--passes", "4", "--runs", "2", "--relevance")
    if "rollout float32" in lines[0]:  # a host without native bf16: no packed copy (the case below)
        pytest.skip(f"this host samples in float32, so there is no DecodeStep to take apart: {lines[0]}")
    start = next(i for i, line in enumerate(lines) if line.startswith("breakdown of one sampling, 16 rows x 4 passes"))
    parts = {m.group(1).strip(): float(m.group(2)) for line in lines[start + 1:]
             if (m := re.match(r"  (\S.*?)\s+(-?[\d.]+) ms\s+(-?[\d.]+)%", line))}
    assert {"linear products", "attention", "RMS norms", "LM head", "cache update",
            "rope, residuals, the MLP's SiLU, the final norm"} <= set(parts), lines
    # each wrapped part is timed once: were one counted inside another, the step's remainder would go negative
    assert all(ms >= 0 for ms in parts.values()) and parts["linear products"] > 0 and parts["attention"] > 0, parts
    timed = {m.group(1): m.group(2) for line in lines
             if (m := re.match(r"  (grouped matmuls \(default\)|fused sdpa in decoding)\s+([\d., ]+)  \(", line))}
    assert set(timed) == {"grouped matmuls (default)", "fused sdpa in decoding"}, lines
    assert all(len(v.split(",")) == 2 for v in timed.values())  # one figure per alternation
    floors = {m.group(1): float(m.group(2)) for line in lines
              if (m := re.match(r"  (grouped matmuls \(default\)|fused sdpa in decoding)\s+q ([\d.e+-]+), mean", line))}
    assert len(floors) == 2 and all(0 <= q < 1 for q in floors.values()), lines


def test_decode_pass_says_there_is_nothing_to_take_apart_in_float32():
    lines = _run("bench/decode_pass.py", "--model", "tiny-random", "--dtype", "float32", "--passes", "2")
    assert "rollout float32" in lines[0], lines
    assert sum("decodes with the model's own forward (no DecodeStep)" in line for line in lines) == 2, lines
