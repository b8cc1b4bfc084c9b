"""The openrlhf backend's other placement modes, trained for real on this CPU for 2 steps each (as
tests/test_openrlhf_cpu_runs.py, whose module docstring says how): DeepSpeed ZeRO-3 with a
reference model (the k3 KL term), and policy actors colocated with the vLLM engines. Slow: one
real run each, about two minutes on two cores."""

from __future__ import annotations

import pytest
from openrlhf_cpu_run import cell_args, ray_head, run_cell, shim_env, tiny_model_dir, why_cannot_run

SKIP = why_cannot_run()
pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.timeout(1800), pytest.mark.skipif(SKIP is not None, reason=SKIP or "")]


def _train(tmp_path, gpus: int, algo: str, *extra: str):
    from toy_task import register

    register()
    model = tiny_model_dir(tmp_path / "tiny-llama")
    env = shim_env(tmp_path / "shim.jsonl")
    with ray_head(gpus, env) as address:
        run = run_cell(cell_args(model, tmp_path / "rec", algo, address, *extra), env, tmp_path / "rec")
    assert run.returncode == 0, run.output[-4000:]
    rows = run.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    ds, vllm = run.checksums("deepspeed"), run.checksums("vllm")
    assert len(ds) == len(vllm) == 2
    for a, b in zip(ds, vllm):
        assert a["sum"] == pytest.approx(b["sum"], rel=1e-12) and a["sq"] == pytest.approx(b["sq"], rel=1e-12)
    return run, rows


def test_zero3_with_a_reference_model_trains_with_the_kl_term(tmp_path):
    # actor + reference + engine: three logical GPUs; ZeRO-3 admits the algorithms that do not replay
    _, rows = _train(tmp_path, 3, "grpo", "--backend.openrlhf.zero_stage", "3", "--optim.kl_coef", "0.01")
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-3)  # step 1: the policy is the reference
    assert rows[1]["kl"] > 0  # after an update it has moved away from it


def test_colocated_actors_and_engines_train_on_one_logical_gpu(tmp_path):
    # one bundle shared by the policy actor and the engine; DeepSpeed offloads its states between phases
    # (--ds.enable_sleep); vLLM's sleep mode does not exist on CPU (the shim turns it off)
    run, rows = _train(tmp_path, 1, "mrtpo", "--backend.openrlhf.colocate", "true")
    assert all(r["replay_share"] > 0 for r in rows)
