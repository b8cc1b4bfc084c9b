"""Every backend declares the run-config settings it honours (issue 32, item 2).

The walk: for every registered backend and the plugin example's, every field of the run config is
set away from its default through the command-line parser, and the setting is either honoured
(the backend's ``honours``, or the harness's own fields) or refused by pre-flight in one line that
names the field and the backend. A field added to the run config is refused by every backend until
one declares it, and the tables below then fail until someone decides what each backend does.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from harness.backends import BACKENDS
from harness.backends.honours import (
    HARNESS_FIELDS,
    LOOP_FIELDS,
    OFF_VALUES,
    STEP_FIELDS,
    covers,
    field_paths,
    is_off,
    unknown_declarations,
)
from harness.config import RunConfig, resolve
from harness.preflight import PreflightError, check_settings, preflight

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "docs" / "examples"))
from mrbench_plugin_example.backend import CannedBackend

BACKEND_CLASSES = {**{name: BACKENDS.get(name) for name in BACKENDS.names()}, CannedBackend.name: CannedBackend}

#: a valid value other than the default, for the fields whose type alone does not give one
NON_DEFAULT = {
    "task.name": "toolcall", "task.data_dir": "elsewhere/data.jsonl", "task.split": "test", "task.limit": "3",
    "task.options": "{max_chars: 6}", "task.verifier_timeout_s": "1",
    "algo.name": "grpo", "algo.params": "{beta: 0.25}",
    "model.name": "some-org/some-model", "model.dtype": "bfloat16", "model.train_dtype": "bfloat16",
    "model.device": "cpu", "model.lora_dropout": "0.1", "model.cache_dir": "model-cache",
    "backend.local.generator": "transformers", "backend.local.vllm_gpu_memory_utilization": "0.4",
    "backend.local.rollout_attention": "sdpa", "backend.local.train_attention": "sdpa",
    "backend.local.replay_batching": "exact",
    "backend.local.replay_head": "float32",
    "backend.openrlhf.address": "auto", "backend.openrlhf.vllm_engines": "1",
    "backend.openrlhf.vllm_gpu_memory_utilization": "0.4", "backend.openrlhf.zero_stage": "1",
    "backend.openrlhf.attn_implementation": "eager", "backend.openrlhf.extra_args": "[--vllm.enforce_eager]",
    "backend.options": "{some-plugin: {x: 1}}",
    "sampling.temperature": "0.7", "sampling.top_p": "0.9", "sampling.top_k": "50",
    "optim.betas": "[0.8, 0.99]", "optim.clip_low": "0.1", "optim.kl_coef": "0.01", "optim.entropy_coef": "0.01",
    "optim.weight_decay": "0.01",
    "schedule.eval_benchmarks": "[ifeval]", "schedule.eval_limit": "4", "schedule.eval_max_new_tokens": "64",
    "schedule.eval_max_minutes": "5", "schedule.eval_data_dir": "eval-data",
    "output.root": "elsewhere", "output.dir": "record", "output.credit_groups": "3", "output.loggers": "[tensorboard]",
    "output.logger_group": "a-group", "seed": "7",
}

#: what each built-in backend refuses when set away from its default; a new field lands here (or in
#: the backend's ``honours``) by a decision
REFUSED = {
    "local": {p for p in field_paths() if p.startswith("backend.openrlhf.")} | {"backend.options.some-plugin"},
    "openrlhf": {"model.device", "backend.local.sampling_logits_mb",
                 "backend.local.replay_batching", "backend.local.replay_head", "backend.local.train_attention",
                 "backend.options.some-plugin",
                 "schedule.stop_without_signal", "output.save_merged"},
}


def _default(path: str):
    node = RunConfig()
    for part in path.split("."):
        node = getattr(node, part)
    return node


def non_default(path: str) -> str:
    """A command-line value of field ``path`` other than its default (and its off value)."""
    if path in NON_DEFAULT:
        return NON_DEFAULT[path]
    default = _default(path)
    if isinstance(default, bool):
        return "false" if default else "true"
    if isinstance(default, int):
        return str(default + 1)
    if isinstance(default, float):
        return repr(default * 2 if default else 0.5)
    raise AssertionError(f"run-config field {path}: add a valid non-default value to NON_DEFAULT")


def override(path: str) -> tuple[str, str]:
    if path == "backend.options":
        return "backend.options.some-plugin", "{x: 1}"
    if path == "algo.params":
        return "algo.beta", "0.25"
    return path, non_default(path)


def setting_path(path: str) -> str:
    return "backend.options.some-plugin" if path == "backend.options" else path


def refused_paths(backend_class: type, cfg) -> set[str]:
    return {entry.split("=", 1)[0] for entry in backend_class.ignored(cfg)}


FIELDS = [p for p in field_paths() if p != "backend.name"]


@pytest.mark.parametrize("name", sorted(BACKEND_CLASSES))
@pytest.mark.parametrize("path", FIELDS)
def test_a_setting_is_honoured_or_refused_naming_it_and_the_backend(name, path):
    backend_class = BACKEND_CLASSES[name]
    cfg = resolve(None, [("backend", name), override(path)])
    assert cfg.to_dict() != resolve(None, [("backend", name)]).to_dict(), f"{path}: the value given is the default"
    where = setting_path(path)
    refused = refused_paths(backend_class, cfg)
    assert refused <= {where}, f"setting {path} alone made {name} refuse {refused}"
    node = cfg
    for part in path.split("."):
        node = getattr(node, part)
    if covers(HARNESS_FIELDS | backend_class.honours, where) or is_off(path, node):
        assert not refused  # the off value: a backend without the feature runs as it says
        check_settings(backend_class, cfg)  # no refusal
        return
    assert refused == {where}
    with pytest.raises(PreflightError) as caught:
        check_settings(backend_class, cfg)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and where in message and f"backend {name!r}" in message


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_each_builtin_backend_refuses(name):
    backend_class = BACKEND_CLASSES[name]
    refused = set()
    for path in FIELDS:
        refused |= refused_paths(backend_class, resolve(None, [("backend", name), override(path)]))
    assert refused == REFUSED[name]


@pytest.mark.parametrize("name", sorted(BACKEND_CLASSES))
def test_declarations_name_real_fields(name):
    assert unknown_declarations(BACKEND_CLASSES[name].honours) == []
    assert not HARNESS_FIELDS & BACKEND_CLASSES[name].honours  # the harness's own need no declaring


def test_the_walk_sees_every_field_of_the_run_config():
    def leaves(cls, prefix=""):
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if dataclasses.is_dataclass(default):
                yield from leaves(type(default), f"{prefix}{f.name}.")
            else:
                yield prefix + f.name

    assert field_paths() == list(leaves(RunConfig)) and len(FIELDS) > 80
    assert set(OFF_VALUES) <= set(FIELDS)


@pytest.mark.parametrize("name,overrides", [
    ("openrlhf", [("task.verifier_timeout_s", "0"), ("output.save_merged", "false")]),
    ("example-canned", [("output.save_model", "false"), ("optim.kl_coef", "0")]),
])
def test_the_off_value_of_a_feature_the_backend_lacks_is_accepted(name, overrides):
    check_settings(BACKEND_CLASSES[name], resolve(None, [("backend", name), *overrides]))


@pytest.mark.parametrize("name", sorted(BACKEND_CLASSES))
def test_every_backend_honours_what_the_shared_step_reads(name):
    # each runs the Step (and its prologue, Step.open); the local and plugin engines also run the loop
    honours = BACKEND_CLASSES[name].honours
    assert STEP_FIELDS <= honours
    assert LOOP_FIELDS <= honours or name == "openrlhf"  # OpenRLHF runs its own loop
    assert not (STEP_FIELDS | LOOP_FIELDS) & HARNESS_FIELDS and unknown_declarations(STEP_FIELDS | LOOP_FIELDS) == []


@pytest.mark.parametrize("name,not_run", [("local", []), ("openrlhf", []),
                                          ("example-canned", ["optim.grad_clip=1.0", "output.save_model=true"])])
def test_each_backend_names_the_features_its_defaults_turn_on_that_it_does_not_run(name, not_run):
    backend_class = BACKEND_CLASSES[name]
    assert backend_class.not_run(resolve(None, [("backend", name)])) == not_run
    off = resolve(None, [("backend", name), ("optim.grad_clip", "0"), ("output.save_model", "false")])
    assert backend_class.not_run(off) == [] and backend_class.ignored(off) == []  # set off: nothing to say
    if name in BACKENDS.names():  # the plugin's pre-flight line: tests/test_plugin_examples.py
        plan = preflight(resolve(None, [("backend", name), ("task", "toolcall"), ("algo", "grpo")]), environment=False)
        assert plan.not_run == [] and plan.note() is None


@pytest.mark.parametrize("path,value", [("schedule.checkpoint_every", "2"), ("schedule.no_signal_steps", "3"),
                                        ("schedule.stop_without_signal", "true")])
def test_the_plugin_example_honours_what_the_shared_run_loop_gives(path, value):
    # the plugin's train hands its engine to harness.training.run_loop.RunLoop, which acts on these
    assert CannedBackend.ignored(resolve(None, [("backend", "example-canned"), (path, value)])) == []


def test_every_ignored_setting_is_named_in_one_refusal():
    cfg = resolve(None, [("backend", "openrlhf"), ("model.device", "cpu"), ("output.save_merged", "true"),
                         ("backend.local.replay_head", "float32")])
    with pytest.raises(PreflightError) as caught:
        preflight(cfg, environment=False)
    message = str(caught.value)
    assert message.index("model.device=cpu") < message.index("backend.local.replay_head=float32") \
        < message.index("output.save_merged=true")  # in field order
    assert "or use a backend that honours them (local)" in message


def test_openrlhf_refuses_the_dtypes_openrlhf_cannot_run_and_honours_bfloat16():
    backend = BACKEND_CLASSES["openrlhf"]
    for train_dtype, dtype in [("bfloat16", "bfloat16"), ("bfloat16", "auto"), ("auto", "auto")]:
        assert backend.ignored(resolve(None, [("model.train_dtype", train_dtype), ("model.dtype", dtype)])) == []
    refused = backend.ignored(resolve(None, [("model.train_dtype", "float32"), ("model.dtype", "float16")]))
    assert [e.split("=", 1)[0] for e in refused] == ["model.train_dtype", "model.dtype"]
    assert "bf16 or fp16 only" in refused[0] and "sample in bfloat16" in refused[1]
    # the aliases --help lists mean the same dtypes: bf16 is bfloat16, fp32 float32
    assert backend.ignored(resolve(None, [("model.train_dtype", "bfloat16"), ("model.dtype", "bf16")])) == []
    assert [e.split(" ", 1)[0] for e in backend.ignored(resolve(None, [("model.dtype", "fp32")]))] == \
        ["model.dtype=fp32"]


def test_openrlhf_refuses_a_task_that_does_not_pickle_while_the_budget_needs_a_copy(monkeypatch):
    from harness.backends.openrlhf import checks

    class Unpicklable:
        check = staticmethod(lambda: None)
        hook = lambda self: None

    monkeypatch.setattr("tasks.registry.make_task", lambda name, **options: Unpicklable())
    cfg = resolve(None, [("task.verifier_timeout_s", 1.0)])
    why = checks.unpicklable_task(cfg)
    assert why and "does not pickle" in why and "--task.verifier_timeout_s 0" in why
    assert checks.unpicklable_task(resolve(None, [("task.verifier_timeout_s", 0.0)])) is None
    monkeypatch.undo()
    assert checks.unpicklable_task(cfg) is None  # the built-in task pickles


DRY_RUN = ["run", "--backend", "openrlhf", "--model.train_dtype", "float32", "--model.dtype", "float32",
           "--output.credit_groups", "3", "--task.verifier_timeout_s", "1", "--dry-run"]


def test_the_issue_dry_run_exits_2_naming_each_ignored_setting(tmp_path, monkeypatch, capsys):
    from harness import cli

    monkeypatch.chdir(tmp_path)
    code = cli.main(DRY_RUN)
    out, err = capsys.readouterr()
    assert code == 2, out + err
    (line,) = err.strip().splitlines()
    assert "backend 'openrlhf'" in line
    for setting in ("model.train_dtype=float32", "model.dtype=float32"):
        assert setting in line, line
    assert "verifier_timeout_s" not in line  # honoured: the agent scores under the budget
    assert "credit_groups" not in line  # honoured: the shared step writes credit.jsonl
    assert not any(tmp_path.iterdir())  # nothing written, nothing loaded


def test_the_dry_run_shows_the_settings_openrlhf_honours(tmp_path, capsys):
    from harness import cli

    assert cli.main(["run", "--backend", "openrlhf", "--model.train_dtype", "bfloat16", "--model.dtype", "bfloat16",
                     "--task.verifier_timeout_s", "1", "--dry-run", "--output.dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "--ds.param_dtype bf16" in out.split("OpenRLHF command line:\n", 1)[1].splitlines()[0]
    assert "update: model.train_dtype bfloat16 -> bfloat16: --ds.param_dtype bf16" in out
    assert "rollouts: model.dtype bfloat16 -> bfloat16" in out
    assert "task.verifier_timeout_s 1 s of CPU time per response" in out
    assert not (tmp_path / "r").exists()
