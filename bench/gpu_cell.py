"""Issue 53, parts 2-4: a whole cell of the local backend through the CLI on the GPU.

The cell (:func:`cell_args`): ``mrbench run`` on ifollow, MRTPO (replay from step 1), 4 prompts x 4
responses of up to 48 tokens, 4 steps, a checkpoint after every step, the end-of-run evaluation on 4
held-out cases, and the model exported to ``<record>/model/``; the model is a local folder holding a
random model of SmolLM2-135M's shape with a tokenizer that loads offline (:mod:`gpu_common`). Every
run is ``mrbench`` itself in its own process (``bench/gpu_cli.py``, which also writes the process's
peak CUDA memory):

1. A: the cell, uninterrupted; its figures make the bands (``bench/gpu_bands.py``);
2. then side by side (one small model each; the GPU and the cores have room for three):
   - B: the same cell, SIGTERM once its first checkpoint and metrics row exist, then the same command
     again, which resumes; B's metrics and sample rows must equal A's (wall-clock seconds aside),
     and B's record must be complete (:func:`record_problems`); then ``mrbench eval ifollow-heldout
     --model B/model`` on the export;
   - the same pair (A-det, B-det) under ``torch.use_deterministic_algorithms(True, warn_only=True)``,
     whose warnings name the kernels that have no deterministic variant;
   - with ``harness/numerics.py`` in the tree: A's numerics fingerprint, and whether ``mrbench
     verify`` reproduces A on the same GPU;
3. the verdict on the resume: exact (B equals A), or, where B differs, whether step 1 already
   differs (two runs of one seed differ without any resume: a non-deterministic kernel) and what
   the deterministic pair shows.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gpu_bands
from gpu_common import ROOT, Clock, Results, Section, kill_group, run_process, tail

#: the cell on the GPU: steps and longest response (the CPU form: :data:`CPU_FORM`)
STEPS, MAX_NEW_TOKENS = 4, 48
CPU_FORM = (3, 8)
RESPONSES = 16  # prompts x group size
EVAL_BENCHMARK = "ifollow-heldout"
#: the keys of a metrics row that differ between two runs of one seed: wall-clock seconds
TIME_KEYS = ("time_",)
NONDETERMINISTIC = "does not have a deterministic implementation"


def cell_size(device: str) -> tuple[int, int]:
    """(steps, longest response) of the cell on ``device``."""
    return (STEPS, MAX_NEW_TOKENS) if device != "cpu" else CPU_FORM


def cell_args(model_dir: Path, record: Path, device: str) -> list[str]:
    """The cell's command; on CPU one thread, so that every run of it computes alike on a busy host."""
    steps, new_tokens = cell_size(device)
    return ["run", "--task", "ifollow", "--algo", "mrtpo", "--model", str(model_dir), "--model.device", device,
            "--seed", "0", "--sampling.prompts_per_step", "4", "--sampling.group_size", "4",
            "--sampling.max_new_tokens", str(new_tokens), "--schedule.steps", str(steps), "--schedule.checkpoint_every", "1",
            "--algo.warmup_steps", "0", "--schedule.eval_limit", "4", "--schedule.eval_max_new_tokens", "32",
            "--output.dir", str(record)] + (["--backend.local.threads", "1"] if device == "cpu" else [])


def cli(args: list[str], peak: Path | None = None, deterministic: bool = False) -> list[str]:
    ours = (["--peak-file", str(peak)] if peak else []) + (["--deterministic"] if deterministic else [])
    return [sys.executable, str(ROOT / "bench" / "gpu_cli.py"), *ours, "--", *args]


def child_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def rows(record: Path, name: str = "metrics.jsonl") -> list[dict[str, Any]]:
    path = record / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith(TIME_KEYS)}


def first_difference(a: Path, b: Path) -> str | None:
    """Where B's metrics or sample rows first differ from A's (wall-clock seconds aside), or None."""
    for name in ("metrics.jsonl", "samples.jsonl"):
        ra, rb = rows(a, name), rows(b, name)
        if len(ra) != len(rb):
            return f"{name}: {len(ra)} rows against {len(rb)}"
        for x, y in zip(ra, rb):
            x, y = comparable(x), comparable(y)
            for key in sorted(set(x) | set(y)):
                if x.get(key) != y.get(key):
                    return f"{name} step {x.get('step')} {key}: {x.get(key)!r} against {y.get(key)!r}"
    return None


def record_problems(record: Path, steps: int, resumed: int) -> list[str]:
    """What a finished, resumed record with an export lacks (an empty list: complete)."""
    problems = [f"{name} missing" for name in ("config.json", "provenance.json", "metrics.jsonl", "samples.jsonl",
                                               "eval.json", "model/config.json") if not (record / name).exists()]
    if not list((record / "model").glob("*.safetensors")):
        problems.append("model/*.safetensors missing")
    if not list((record / "model").glob("tokenizer*")):
        problems.append("model/ has no tokenizer files")
    if [r.get("step") for r in rows(record)] != list(range(1, steps + 1)):
        problems.append(f"metrics steps {[r.get('step') for r in rows(record)]}, not 1..{steps}")
    if (record / "provenance.json").exists():
        prov = json.loads((record / "provenance.json").read_text(encoding="utf-8"))
        if prov.get("status") != "finished":
            problems.append(f"provenance status {prov.get('status')!r}")
        if len(prov.get("resumed") or []) != resumed:
            problems.append(f"provenance says resumed {len(prov.get('resumed') or [])} times, not {resumed}")
    if (record / "eval.json").exists():
        evaluated = json.loads((record / "eval.json").read_text(encoding="utf-8")).get("benchmarks", {})
        if EVAL_BENCHMARK not in evaluated or "error" in evaluated.get(EVAL_BENCHMARK, {}):
            problems.append(f"eval.json has no {EVAL_BENCHMARK} result")
    return problems


def interrupted(args: list[str], record: Path, log: Path, timeout: float, deterministic: bool = False) -> str:
    """The cell, SIGTERM once its first checkpoint and metrics row exist: what happened, in words."""
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(cli(args, deterministic=deterministic), cwd=ROOT, env=child_env(), stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if (record / "checkpoint" / "state.pt").exists() and rows(record):
                break
            time.sleep(0.05)
        if proc.poll() is not None:
            return f"ended (status {proc.returncode}) before its first checkpoint was seen"
        if time.monotonic() >= deadline:
            kill_group(proc)
            return "no checkpoint within its time: killed"
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=max(5.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return "did not stop after SIGTERM: killed"
    return f"SIGTERM after {len(rows(record))} step(s): status {proc.returncode}"


def run_cell(clock: Clock, sec: Section, results: Results, model_dir: Path, work: Path, device: str,
             bands_out: Path | None, bands_in: Path | None, environment: dict[str, Any]) -> bool:
    """The section (see the module docstring); True when every check it reached held."""
    a, b = work / "A", work / "B"
    steps, new_tokens = cell_size(device)
    sec.need(40, "the uninterrupted cell (A)")
    rc = run_process(cli(cell_args(model_dir, a, device), peak=work / "A.peak"), sec.timeout(120), work / "A.log",
                     child_env())
    signal_steps = sum(1 for r in rows(a) if r.get("adv_nonzero_tokens"))
    clock.say(f"cell A (uninterrupted, {steps} steps): status {rc}, {len(rows(a))} metrics rows; steps with a "
              f"learning signal (some advantage not 0: replay and update ran) {signal_steps}, replayed pairs per "
              f"step {[r.get('replay_pairs') for r in rows(a)]}")
    if rc != 0:
        clock.say(tail(work / "A.log", 20))
        return False
    peak = json.loads((work / "A.peak").read_text())["allocated"] if (work / "A.peak").exists() else None
    figures = gpu_bands.observe(rows(a), peak, RESPONSES)
    clock.say(f"cell A per step (median of steps 2-{steps}): " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))
    results.put("cell/figures", figures)
    results.put("cell/metrics_A", rows(a))
    ok = True
    if bands_in is not None:
        problems = gpu_bands.check(gpu_bands.read(bands_in), figures)
        clock.say(f"bands {bands_in.name}: " + ("within bands" if not problems else "; ".join(problems)))
        results.put("cell/band_check", problems)
        return not problems
    if bands_out is not None:
        bands = {"what": f"bench/gpu_e2e.py's CLI cell: mrbench run on ifollow, MRTPO, 4 prompts x 4 responses of up "
                         f"to {new_tokens} tokens, {steps} steps, a checkpoint after every step",
                 "measured": {**environment, "command": "python bench/gpu_e2e.py"},
                 "run": {"steps": steps, "responses": RESPONSES, "max_new_tokens": new_tokens,
                         "model_dir": model_dir.name},
                 "bands": gpu_bands.make_bands(figures)}
        bands_out.write_text(json.dumps(bands, indent=1) + "\n", encoding="utf-8")
        clock.say(f"bands written to {bands_out.name}")

    # the rest side by side (one small model each: the GPU and the machine's cores have room for three)
    sec.need(60, "the resumed cell, the deterministic pair and mrbench verify")
    with ThreadPoolExecutor(3) as pool:
        chains = [pool.submit(resumed_and_evaluated, clock, sec, results, model_dir, work, device),
                  pool.submit(deterministic_pair, clock, sec, results, model_dir, work, device),
                  pool.submit(numerics, clock, sec, results, a, work)]
        resumed, det, _ = (chain.result() for chain in chains)
    step1 = first_difference_at_step(a, b, 1)
    if resumed["difference"] is None:
        verdict = "the resume is exact: the resumed run's rows equal the uninterrupted run's"
    elif step1 is not None:
        verdict = (f"the rows differ already at step 1, before any resume ({step1}): two runs of one seed differ "
                   f"on this device; under deterministic algorithms the resumed run's rows "
                   + ("equal the uninterrupted run's" if det.get("difference") is None else
                      f"still differ ({det.get('difference')})"))
    else:
        verdict = f"step 1 is identical and the rows differ after the resume: {resumed['difference']}"
    clock.say(f"resume: {verdict}")
    results.put("cell/resume_verdict", verdict)
    exact = resumed["difference"] is None or (step1 is not None and det.get("difference") is None)
    return ok and exact and resumed["ok"]


def resumed_and_evaluated(clock: Clock, sec: Section, results: Results, model_dir: Path, work: Path,
                          device: str) -> dict[str, Any]:
    """B: SIGTERM, resume, the rows against A and the record's completeness; then mrbench eval on the export."""
    b = work / "B"
    what = interrupted(cell_args(model_dir, b, device), b, work / "B1.log", sec.timeout(90))
    rc = run_process(cli(cell_args(model_dir, b, device)), sec.timeout(120), work / "B2.log", child_env())
    diff = first_difference(work / "A", b)
    problems = record_problems(b, cell_size(device)[0], resumed=1)
    clock.say(f"cell B: {what}; resumed run status {rc}; rows against A: "
              f"{'identical' if diff is None else 'differ: ' + diff}; record: "
              f"{'complete' if not problems else '; '.join(problems)}")
    if rc != 0:
        clock.say(tail(work / "B2.log", 20))
    results.put("cell/resume", {"interrupted": what, "status": rc, "difference": diff, "record_problems": problems})
    evaluated = work / "eval"
    rc_eval = run_process([sys.executable, "-m", "harness.cli", "eval", EVAL_BENCHMARK, "--model", str(b / "model"),
                           "--out", str(evaluated), "--limit", "4", "--max-new-tokens", "32"], sec.timeout(60),
                          work / "eval.log", child_env())
    summary = evaluated / "summary.json"
    clock.say(f"mrbench eval {EVAL_BENCHMARK} --model B/model: status {rc_eval}, summary.json "
              f"{'written' if summary.exists() else 'MISSING'}")
    results.put("cell/eval", {"status": rc_eval,
                              "summary": json.loads(summary.read_text()) if summary.exists() else None})
    return {"difference": diff, "ok": rc == 0 and not problems and rc_eval == 0 and summary.exists()}


def deterministic_pair(clock: Clock, sec: Section, results: Results, model_dir: Path, work: Path,
                       device: str) -> dict[str, Any]:
    """A and B again under ``torch.use_deterministic_algorithms(True, warn_only=True)``; the kernels
    its warnings name as having no deterministic variant."""
    a, b = work / "A-det", work / "B-det"
    rc = run_process(cli(cell_args(model_dir, a, device), deterministic=True), sec.timeout(120), work / "A-det.log",
                     child_env())
    what = interrupted(cell_args(model_dir, b, device), b, work / "B-det1.log", sec.timeout(90), deterministic=True)
    rc_b = run_process(cli(cell_args(model_dir, b, device), deterministic=True), sec.timeout(120),
                       work / "B-det2.log", child_env())
    diff = first_difference(a, b) if rc == 0 and rc_b == 0 else f"a run failed (status {rc}, {rc_b})"
    kernels = sorted({line.strip()[:240] for log in ("A-det.log", "B-det1.log", "B-det2.log")
                      for line in (work / log).read_text(errors="replace").splitlines() if NONDETERMINISTIC in line})
    clock.say(f"deterministic pair: A status {rc}, B {what}, resumed status {rc_b}; rows "
              f"{'identical' if diff is None else 'differ: ' + diff}; kernels without a deterministic variant: "
              + ("; ".join(kernels) if kernels else "none reported"))
    out = {"status": [rc, rc_b], "interrupted": what, "difference": diff, "kernels": kernels,
           "A_against_default_A": first_difference(work / "A", a)}
    results.put("cell/deterministic", out)
    return out


def first_difference_at_step(a: Path, b: Path, step: int) -> str | None:
    ra = [comparable(r) for r in rows(a) if r.get("step") == step]
    rb = [comparable(r) for r in rows(b) if r.get("step") == step]
    if ra == rb:
        return None
    x, y = (ra or [{}])[0], (rb or [{}])[0]
    key = next((k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)), "?")
    return f"{key}: {x.get(key)!r} against {y.get(key)!r}"


def numerics(clock: Clock, sec: Section, results: Results, record: Path, work: Path) -> None:
    """Issue 53 part 4, where harness/numerics.py exists: the fingerprint and ``mrbench verify``."""
    if importlib.util.find_spec("harness.numerics") is None:
        clock.say("numerics: harness/numerics.py is not in this tree (issue 48): no fingerprint, no verify")
        return
    prov = json.loads((record / "provenance.json").read_text(encoding="utf-8"))
    block = prov.get("numerics") or {}
    clock.say(f"numerics: fingerprint {block.get('fingerprint')}, device class {block.get('device_class')}, "
              f"dtypes {block.get('dtypes')}")
    rc = run_process([sys.executable, "-m", "harness.cli", "verify", str(record), "--steps", "2"], sec.timeout(90),
                     work / "verify.log", child_env())
    said = tail(work / "verify.log", 1)
    clock.say(f"mrbench verify A --steps 2: status {rc}: {said}")
    results.put("cell/numerics", {"block": block, "verify_status": rc, "verify_said": said})
