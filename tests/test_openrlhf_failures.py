"""The openrlhf backend's bounded failures, without Ray: a prompt + response budget over the model's
positions is refused at pre-flight naming both numbers (it used to leave the policy actor in the
weight-sync rendezvous for 300 s), and the one-line causes the entry point prints and the backend
reads back; and a vLLM engine that cannot start, from the policy actor's wait to mrbench's one line,
with stubs in place of Ray and vLLM (the real run is the slow test of tests/test_openrlhf_cpu_runs.py)."""

from __future__ import annotations

import json
import time

import pytest
from toy_task import register

from harness import cli
from harness.backends.openrlhf import checks
from harness.backends.openrlhf.failures import CAUSE_PREFIX, cause_in_log, gpu_shortfall, gpus_needed, one_line
from harness.config import resolve


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from harness.models import tiny_model

    path = tmp_path_factory.mktemp("tiny-llama")
    loaded = tiny_model(0, hidden_size=128)
    loaded.model.save_pretrained(path)
    loaded.tokenizer.save_pretrained(path)
    return path


def test_a_tiny_model_with_the_default_prompt_budget_is_refused_at_once_naming_both_numbers(tiny_dir, tmp_path,
                                                                                           capsys):
    register()
    positions = json.loads((tiny_dir / "config.json").read_text())["max_position_embeddings"]
    defaults = resolve(None, []).sampling
    total = defaults.max_prompt_tokens + defaults.max_new_tokens
    assert total > positions  # the case of the issue: 4096 + new tokens over a 4096-position model
    rec = tmp_path / "rec"
    t0 = time.monotonic()
    code = cli.main(["run", "--task", "toy", "--algo", "grpo", "--model", str(tiny_dir), "--backend", "openrlhf",
                     "--output.dir", str(rec)])
    seconds = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 2 and not rec.exists()
    line = next(x for x in err.splitlines() if "max_position_embeddings" in x)
    assert f"= {total} tokens" in line and f"{positions} positions" in line and str(tiny_dir) in line
    assert f"--sampling.max_prompt_tokens {positions - defaults.max_new_tokens}" in line
    assert seconds < 10
    # within the positions: no refusal (the dry run prints the launch)
    assert cli.main(["run", "--task", "toy", "--algo", "grpo", "--model", str(tiny_dir), "--backend", "openrlhf",
                     "--sampling.max_prompt_tokens", str(positions - defaults.max_new_tokens), "--dry-run",
                     "--output.dir", str(rec)]) == 0


def test_positions_come_from_the_config_with_vllms_rope_scaling(tmp_path):
    def model(**config):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        return str(d)

    assert checks.model_positions(model(max_position_embeddings=2048))[0] == 2048
    assert checks.model_positions(model(max_position_embeddings=2048,
                                        rope_scaling={"rope_type": "yarn", "factor": 4.0}))[0] == 8192
    assert checks.model_positions(model(max_position_embeddings=131072,
                                        rope_scaling={"rope_type": "llama3", "factor": 8.0}))[0] == 131072
    assert checks.model_positions(model(text_config={"max_position_embeddings": 512}))[0] == 512
    assert checks.model_positions(model(hidden_size=8)) is None
    assert checks.model_positions(str(tmp_path / "absent")) is None  # not a directory, not in the hub cache


def test_one_line_causes_and_the_log_they_are_read_from(tmp_path):
    class Wrapped(Exception):
        def __init__(self, text, cause):
            super().__init__(text)
            self.cause = cause

    inner = ValueError("max_model_len 4112 is larger than the model's 4096 positions")
    wrapped = Wrapped("ray.exceptions.RayTaskError\nTraceback (most recent call last):\n  File x\nstuff", inner)
    assert one_line(wrapped) == "ValueError: max_model_len 4112 is larger than the model's 4096 positions"
    died = RuntimeError("The actor died because of an error raised in its creation task\nTraceback:\n  File y\n"
                        "ValueError: head size 16 is not supported\n")
    assert one_line(died) == "ValueError: head size 16 is not supported"
    pydantic = RuntimeError("Traceback:\n  File z\npydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                            "  Value error, Model architectures ['X'] are not supported for now. " + "x" * 900)
    line = one_line(pydantic)
    assert line.startswith("pydantic_core.ValidationError: 1 validation error for ModelConfig: Value error, Model "
                           "architectures ['X'] are not supported") and len(line) == 400 and line.endswith("...")
    log = tmp_path / "launch.log"
    log.write_text(f"noise\n{CAUSE_PREFIX}EngineStartError: vLLM engine 0 could not start: ValueError: x\nmore\n")
    assert cause_in_log(log) == "EngineStartError: vLLM engine 0 could not start: ValueError: x"
    assert cause_in_log(tmp_path / "none.log") is None


def test_a_cluster_without_the_placements_gpus_is_named_before_openrlhf_waits_for_them():
    cfg = resolve(None, [("backend", "openrlhf"), ("backend.openrlhf.colocate", "false"),
                         ("backend.openrlhf.gpus_per_node", "2"), ("backend.openrlhf.vllm_engines", "1")])
    assert gpus_needed(cfg) == 3
    why = gpu_shortfall(cfg, {"CPU": 8.0})
    assert "has 0 GPU(s)" in why and "needs 3" in why
    assert gpu_shortfall(cfg, {"GPU": 3.0}) is None
    colocated = resolve(None, [("backend", "openrlhf"), ("backend.openrlhf.gpus_per_node", "2")])
    assert gpus_needed(colocated) == 2


# -- a vLLM engine that cannot start, end to end with stubs ---------------------------------------------

#: what Ray's error says for a vLLM engine actor whose creation failed on a model it cannot serve
#: (vLLM's pydantic check of the architecture name; the real text: the slow real run of
#: tests/test_openrlhf_cpu_runs.py)
VLLM_REFUSAL = ("The actor died because of an error raised in its creation task, ray::LLMRayActor.__init__() "
                "(pid=1, ip=127.0.0.1)\n  File \"vllm/config.py\", line 1, in __init__\n"
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
                "  Value error, Model architectures ['UnservableLlamaForCausalLM'] are not supported for now. "
                "Supported architectures: dict_keys([" + ", ".join(f"'Arch{i}ForCausalLM'" for i in range(60))
                + "]) [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n")

#: the OpenRLHF process in place of ``python -m harness.backends.openrlhf.main``: mrbench's entry
#: point runs as it is, under the stubs of tests/openrlhf_stubs.py; in place of OpenRLHF's driver,
#: mrbench's policy actor starts (its real ``init_model_from_pretrained``) with one vLLM engine whose
#: actor died, and the driver gets the actor's error the way Ray hands it over (``.cause``)
ENGINE_REFUSES = """
import runpy, sys, types
sys.path.insert(0, sys.argv.pop(1))
from openrlhf_stubs import stubbed_openrlhf
from toy_task import register

VLLM_REFUSAL = sys.argv.pop(1)
register()
with stubbed_openrlhf():
    ray = sys.modules["ray"]

    class RayActorError(Exception):
        pass

    class GetTimeoutError(Exception):
        pass

    class RayTaskError(Exception):
        def __init__(self, cause):
            super().__init__(f"ray::PolicyModelActor.init_model_from_pretrained()\\nTraceback: ...\\n{cause!r}")
            self.cause = cause

    ray.exceptions = sys.modules["ray.exceptions"] = types.ModuleType("ray.exceptions")
    ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError = RayActorError, GetTimeoutError
    ray.cluster_resources = lambda: {"CPU": 6.0, "GPU": 2.0}

    class DeadEngine:
        get_num_unfinished_requests = types.SimpleNamespace(remote=lambda: "ref")

    def engine_get(ref, timeout=None):
        raise RayActorError(VLLM_REFUSAL)

    def openrlhf_driver(name, run_name=None, alter_sys=False):
        from harness.backends.openrlhf.trainer import MRPolicyActorImpl

        ray.get = engine_get
        actor = MRPolicyActorImpl.__new__(MRPolicyActorImpl)
        try:
            actor.init_model_from_pretrained(None, "policy", vllm_engines=[DeadEngine()])
        except Exception as exc:
            raise RayTaskError(exc) from None
        raise AssertionError("the policy actor started without its engine")

    runpy.run_module = openrlhf_driver
    from harness.backends.openrlhf.main import main

    main(sys.argv[1:])
"""


def test_an_engine_that_cannot_start_ends_the_run_with_one_line_naming_the_cause(tiny_dir, tmp_path, monkeypatch,
                                                                                 capsys):
    import sys
    from pathlib import Path

    from openrlhf_cpu_run import cell_args

    from harness.backends.openrlhf import backend

    register()
    tests = str(Path(__file__).resolve().parent)
    monkeypatch.setattr(checks, "missing", lambda cfg: None)  # no Ray, vLLM or DeepSpeed needed: stubs
    monkeypatch.setattr(backend, "launch_command",
                        lambda cfg, paths, argv: [sys.executable, "-c", ENGINE_REFUSES, tests, VLLM_REFUSAL, *argv])
    rec = tmp_path / "rec"
    assert cli.main(cell_args(tiny_dir, rec, "grpo", "127.0.0.1:1")) == 1
    out, err = capsys.readouterr()
    assert "Traceback" in out  # the OpenRLHF process's own output (its log) keeps the whole story
    lines = [x for x in err.splitlines() if x.startswith("mrbench run:")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    assert "after 0 of 2 steps: EngineStartError: vLLM engine 0 could not start:" in lines[0], lines[0]
    assert "Model architectures ['UnservableLlamaForCausalLM'] are not supported" in lines[0]
    assert "launch.log" in lines[0]
    assert json.loads((rec / "provenance.json").read_text())["status"] == "failed"
