"""The openrlhf backend as users meet it without a GPU: registered and listed, its typed config
section, pre-flight refusals with their reasons, the machine check naming what is missing, and
``mrbench run --dry-run``."""

from __future__ import annotations

import pytest

from harness import cli
from harness.backends import BACKENDS
from harness.backends.openrlhf import checks
from harness.config import ConfigError, resolve
from harness.preflight import PreflightError, preflight


def test_listed_with_a_description(capsys):
    assert "openrlhf" in BACKENDS.names()
    assert cli.main(["list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("openrlhf "))
    assert "OpenRLHF" in line


def test_typed_section_and_help(capsys):
    cfg = resolve(None, [("backend.openrlhf.zero_stage", "1"), ("backend.openrlhf.address", "http://head:8265")])
    assert cfg.backend.openrlhf.zero_stage == 1 and cfg.backend.openrlhf.address == "http://head:8265"
    with pytest.raises(ConfigError, match="backend.openrlhf.nodes: expected an integer"):
        resolve(None, [("backend.openrlhf.nodes", "many")])
    with pytest.raises(ConfigError, match="backend.openrlhf.gpu: unknown field"):
        resolve(None, [("backend.openrlhf.gpu", "1")])
    with pytest.raises(ConfigError, match="backend.options.openrlhf"):
        resolve(None, [("backend.options.openrlhf.nodes", "1")])
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    assert "--backend.openrlhf.address" in out and "--backend.openrlhf.vllm_engines" in out and "--dry-run" in out


def _cfg(*overrides):
    return resolve(None, [("backend", "openrlhf"), *overrides])


@pytest.mark.parametrize("overrides,message", [
    ([("algo", "grpo")], None),
    ([("algo", "gdpo"), ("backend.openrlhf.zero_stage", "3")], None),  # no replay: ZeRO-3 is fine
    ([("algo", "opsd"), ("task", "toolcall")], "cannot add opsd's own loss term"),
    ([("algo", "mrtpo"), ("backend.openrlhf.zero_stage", "3")], "zero_stage=3 cannot follow"),
    ([("algo", "mrtpo-oracle"), ("backend.openrlhf.zero_stage", "3")], None),  # read masks: no forward pass
    ([("algo", "mrtpo-oracle+saw"), ("backend.openrlhf.async_rollouts", "true")], None),
    ([("algo", "ktae"), ("backend.openrlhf.zero_stage", "3")], None),  # token ids: no forward pass
    ([("algo", "ktae-summed")], None),
    ([("algo", "forking")], "cannot supply forking's old-policy entropy"),
    ([("algo", "gtpo-summed")], "cannot supply gtpo-summed's old-policy entropy"),
    ([("algo", "mrtpo-joint"), ("backend.openrlhf.tensor_parallel", "2")], "tensor_parallel=2 cannot follow"),
    ([("algo", "mrtpo"), ("backend.openrlhf.async_rollouts", "true")], "async_rollouts the actors have moved on"),
    ([("model", "tiny-random")], "exists only in memory"),
    ([("optim.mini_batches", "3")], "must divide the 16 samples"),
    ([("backend.openrlhf.gpus_per_node", "8")], "micro_batch_size=4 on each of the 8 data-parallel"),
    ([("backend.openrlhf.gpus_per_node", "8")],  # the refusal names the settings that fit (newcomer review 5)
     (r"set --sampling.prompts_per_step 4 \(32 samples per update, 4 per actor: 1 micro-batch\(es\) of 4\), "
      r"or --optim.micro_batch_size 2")),
    ([("backend.openrlhf.gpus_per_node", "8"), ("sampling.prompts_per_step", "4")], None),
    ([("backend.openrlhf.gpus_per_node", "2"), ("backend.openrlhf.vllm_engines", "1")], "set vllm_engines to 2"),
    ([("backend.openrlhf.nodes", "2")], "needs a running Ray cluster"),
    ([("backend.openrlhf.extra_args", "[--train.seed, '3', --vllm.enforce_eager]")], "sets --train.seed"),
    ([("backend.openrlhf.extra_args", "[--reward.overlong_buffer_len, '64']")], "OpenRLHF's scalar reward"),
    ([("backend.openrlhf.extra_args", "[--actor.dual_clip, '3']")], "dual_clip, which changes OpenRLHF's policy loss"),
    ([("backend.openrlhf.extra_args", "[--train.enable_ema]")], "run mrbench's objective"),
])
def test_preflight_refusals_give_the_reason(overrides, message):
    cfg = _cfg(*overrides)
    if message is None:
        preflight(cfg, environment=False)
        return
    with pytest.raises(PreflightError, match=message):
        preflight(cfg, environment=False)


def test_machine_check_names_what_is_missing_and_how_to_install(monkeypatch):
    import torch

    monkeypatch.setattr(checks, "_absent", lambda name: name in ("vllm", "deepspeed"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    why = checks.missing(_cfg())
    assert "vllm, deepspeed" in why and "pip install 'mrbench[openrlhf]'" in why and "no CUDA GPU" in why
    with pytest.raises(PreflightError, match="--backend openrlhf: cannot train here"):
        preflight(_cfg())
    # a Ray job runs on the cluster: only the `ray` client is needed here, and no GPU
    assert checks.missing(_cfg(("backend.openrlhf.address", "http://head:8265"))) is None
    monkeypatch.setattr(checks, "_absent", lambda name: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert checks.missing(_cfg()) is None


def test_run_without_a_gpu_stops_before_any_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(checks, "missing", lambda cfg: "cannot train here: missing Python package(s) vllm")
    rec = tmp_path / "rec"
    assert cli.main(["run", "--backend", "openrlhf", "--output.dir", str(rec)]) == 2
    assert "cannot train here" in capsys.readouterr().err and not rec.exists()


@pytest.mark.parametrize("config", [None, "toolcall-paper"])
def test_dry_run_prints_command_and_placement_without_gpu_ray_or_vllm(tmp_path, monkeypatch, capsys, config):
    monkeypatch.setattr(checks, "missing", lambda cfg: pytest.fail("a dry run must not check the machine"))
    rec = tmp_path / "rec"
    argv = ["run", "--backend", "openrlhf", "--dry-run", "--output.dir", str(rec),
            "--backend.openrlhf.gpus_per_node", "2"] + (["--config", config] if config else [])
    if config:  # a paper recipe updates in float32, which OpenRLHF cannot: pre-flight refuses it
        assert cli.main(argv) == 2 and "model.train_dtype=float32" in capsys.readouterr().err
        argv += ["--model.train_dtype", "bfloat16"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    command = out.split("OpenRLHF command line:\n", 1)[1].splitlines()[0].strip()
    assert "-m harness.backends.openrlhf.main" in command and "--rollout.n_samples_per_prompt" in command
    assert "node 0 GPU 1: policy actor rank 1" in out and "vLLM engine 1" in out
    assert f"MRBENCH_CELL={rec.resolve() / 'openrlhf' / 'cell.json'}" in out
    assert not rec.exists()  # nothing written


def test_dry_run_of_a_ray_job_submits_with_the_runtime_env(tmp_path, capsys):
    assert cli.main(["run", "--backend", "openrlhf", "--dry-run", "--output.dir", str(tmp_path / "r"),
                     "--backend.openrlhf.address", "http://head:8265"]) == 0
    command = capsys.readouterr().out.split("OpenRLHF command line:\n", 1)[1].splitlines()[0].strip()
    assert command.startswith("ray job submit --address http://head:8265 --runtime-env-json")
    assert '"working_dir"' in command and "MRBENCH_CELL" in command
    assert "--train.agent_func_path harness/backends/openrlhf/agent.py" in command  # relative to the job's copy


def test_dry_run_still_refuses_what_cannot_run(tmp_path, capsys):
    assert cli.main(["run", "--backend", "openrlhf", "--dry-run", "--algo", "mrtpo",
                     "--backend.openrlhf.zero_stage", "3", "--output.dir", str(tmp_path / "r")]) == 2
    assert "zero_stage=3" in capsys.readouterr().err


def test_local_backend_dry_run_says_it_launches_nothing(tmp_path, capsys):
    assert cli.main(["run", "--dry-run", "--output.dir", str(tmp_path / "r")]) == 0
    assert "launches nothing" in capsys.readouterr().out


def test_the_evaluation_through_openrlhf_says_how_it_decoded():
    """Its end-of-run evaluation generates with the local backend's generator, and eval.json's
    decoding (precision, attention) and the memory fit come from that generator."""
    from evals.generate_cases import decoding_info
    from harness.backends import BACKENDS

    backend = BACKENDS.get("openrlhf")(_cfg(("model", "tiny-random"), ("model.dtype", "float32")))
    assert decoding_info(backend.generate) == {}  # nothing generated yet
    assert backend.generation_bytes([{"role": "user", "content": "hi"}], 4, 8) > 0
    assert len(backend.generate([[{"role": "user", "content": "hi"}]], 2)) == 1
    assert decoding_info(backend.generate)["dtype"] == "float32"


def test_the_dry_runs_verifier_line_says_the_budget_is_cpu_time_with_its_wall_cap():
    from harness.backends.openrlhf.backend import verifier_budget
    from harness.config import RunConfig
    from mrbench_core.time_budget import wall_cap

    cfg = RunConfig()
    cfg.task.verifier_timeout_s = 5
    line = verifier_budget(cfg)
    assert line.startswith("task.verifier_timeout_s 5 s of CPU time per response")
    assert f"at most {wall_cap(5):g} s of wall-clock time" in line and "killed past the budget" in line
    cfg.task.verifier_timeout_s = 0
    assert verifier_budget(cfg) == "task.verifier_timeout_s 0: no time budget"
