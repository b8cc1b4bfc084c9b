"""Run-config fields are checked where they are declared: a value out of range is a one-line
error naming the field and the range, for every backend, before any model (or torch) loads."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing

import pytest

from harness import config as C
from harness.config import ConfigError, RunConfig, resolve
from mrbench_core.fields import range_text

pytestmark = pytest.mark.torchfree


@pytest.mark.parametrize("dotted, value, message", [
    ("sampling.temperature", "0", "sampling.temperature: must be > 0, got 0.0"),
    ("sampling.temperature", "-1", "sampling.temperature: must be > 0, got -1.0"),
    ("sampling.group_size", "1", "sampling.group_size: must be >= 2, got 1"),
    ("sampling.top_p", "1.5", "sampling.top_p: must be > 0 and <= 1, got 1.5"),
    ("sampling.top_k", "0", "sampling.top_k: must be >= 1, got 0"),
    ("sampling.max_new_tokens", "0", "sampling.max_new_tokens: must be >= 1, got 0"),
    ("optim.lr", "-1", "optim.lr: must be > 0, got -1.0"),
    ("optim.lr", "0", "optim.lr: must be > 0, got 0.0"),
    ("optim.mini_batches", "0", "optim.mini_batches: must be >= 1, got 0"),
    ("optim.micro_batch_size", "0", "optim.micro_batch_size: must be >= 1, got 0"),
    ("optim.betas", "[0.9, 1.0]", "optim.betas: must be two numbers, each >= 0 and < 1"),
    ("schedule.steps", "0", "schedule.steps: must be >= 1 and <= 1000000, got 0"),
    ("schedule.steps", "99999999999999999999", "schedule.steps: must be >= 1 and <= 1000000, got 99999999999999999999"),
    ("schedule.steps", "10000000000", "schedule.steps: must be >= 1 and <= 1000000, got 10000000000"),
    ("schedule.checkpoint_every", "-1", "schedule.checkpoint_every: must be >= 0, got -1"),
    ("task.limit", "0", "task.limit: must be >= 1, got 0"),
    ("model.lora_dropout", "1.0", "model.lora_dropout: must be >= 0 and < 1, got 1.0"),
    ("backend.local.vllm_gpu_memory_utilization", "1.5",
     "backend.local.vllm_gpu_memory_utilization: must be > 0 and <= 1, got 1.5"),
    ("backend.openrlhf.nodes", "0", "backend.openrlhf.nodes: must be >= 1, got 0"),
    ("backend.openrlhf.vllm_engines", "0", "backend.openrlhf.vllm_engines: must be >= 1, got 0"),
    ("output.credit_groups", "-1", "output.credit_groups: must be >= 0, got -1"),
])
def test_out_of_range_names_field_and_range(dotted, value, message):
    with pytest.raises(ConfigError) as err:
        resolve(None, [(dotted, value)])
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("dotted, value", [
    ("sampling.temperature", "0.01"), ("sampling.group_size", "2"), ("sampling.top_p", "1"),
    ("sampling.top_k", "null"), ("optim.lr", "1e-7"), ("schedule.steps", "1"), ("task.limit", "null"),
    ("schedule.eval_limit", "null"), ("optim.grad_clip", "0"), ("schedule.checkpoint_every", "0"),
])
def test_edge_values_inside_the_range_pass(dotted, value):
    resolve(None, [(dotted, value)])


def test_sections_built_directly_are_checked_too():
    with pytest.raises(ConfigError, match="sampling.group_size: must be >= 2"):
        C.SamplingConfig(group_size=1)
    with pytest.raises(ConfigError, match="optim.lr: must be > 0"):
        C.OptimConfig(lr=0.0)


def test_every_bounded_default_is_inside_its_range():
    RunConfig()  # the defaults themselves validate
    bounded = [f for cls in (C.SamplingConfig, C.OptimConfig, C.ScheduleConfig)
               for f in dataclasses.fields(cls) if range_text(f)]
    assert {"temperature", "group_size", "lr", "mini_batches", "steps", "max_new_tokens", "top_p"} <= {
        f.name for f in bounded}


@pytest.mark.parametrize("backend", ["local", "openrlhf"])
@pytest.mark.parametrize("flag, value, field", [
    ("--sampling.temperature", "0", "sampling.temperature"),
    ("--sampling.group_size", "1", "sampling.group_size"),
])
def test_cli_refuses_before_any_model_loads(backend, flag, value, field):
    """Exit 2 with one line naming the field; torch (and so any model) was never imported."""
    code = ("import sys; from harness.cli import main; "
            f"rc = main(['run', '--backend', {backend!r}, '--model', 'tiny-random', {flag!r}, {value!r}]); "
            "print('RC', rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert "RC 2 False" in out.stdout, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mrbench run: {field}: must be"), out.stderr


# ---------------------------------------------------------------------------------------------
# string options with a fixed set of values: refused at parse, the allowed values listed

CHOICE_FIELDS = [  # (dotted path, the tuple the code that uses the value imports)
    ("model.dtype", C.MODEL_DTYPES), ("model.train_dtype", C.TRAIN_DTYPES),
    ("backend.local.generator", C.GENERATORS), ("backend.local.rollout_attention", C.ROLLOUT_ATTENTIONS),
    ("backend.local.train_attention", C.TRAIN_ATTENTIONS),
    ("backend.local.replay_batching", C.REPLAY_BATCHING), ("backend.local.replay_head", C.REPLAY_HEADS),
]


def _declared_choices(cls: type, prefix: str = "") -> dict[str, tuple]:
    out = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out.update(_declared_choices(hints[f.name], f"{prefix}{f.name}."))
        elif f.metadata.get("choices"):
            out[f"{prefix}{f.name}"] = f.metadata["choices"]
    return out


def test_the_choice_fields_are_declared_with_the_tuples_their_users_import():
    declared = _declared_choices(RunConfig)
    assert declared == dict(CHOICE_FIELDS)
    defaults = RunConfig().to_dict()
    for dotted, allowed in declared.items():  # every default is one of its own choices
        section, _, name = dotted.rpartition(".")
        node = defaults
        for part in section.split("."):
            node = node[part]
        assert node[name] in allowed, dotted


@pytest.mark.parametrize("dotted, allowed", CHOICE_FIELDS)
def test_a_value_not_among_the_choices_is_refused_listing_them(dotted, allowed):
    with pytest.raises(ConfigError) as err:
        resolve(None, [(dotted, "bogus")])
    assert str(err.value) == f"{dotted}: must be one of: {', '.join(allowed)}; got 'bogus'"
    for value in allowed:  # and every allowed value passes
        resolve(None, [(dotted, value)])


def test_run_help_lists_the_choices(capsys):
    from harness import cli

    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.strip().startswith("--backend.local.replay_head ")]
    assert line.endswith("[one of: model, float32, auto]")


def test_a_bad_choice_exits_2_before_a_record_or_torch(tmp_path):
    """``mrbench run --backend.local.replay_head bogus``: exit 2, one line listing the allowed values,
    no record folder under the working directory, and torch never imported."""
    code = ("import sys; from harness.cli import main; "
            "rc = main(['run', '--model', 'tiny-random', '--backend.local.replay_head', 'bogus']); "
            "print('RC', rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert "RC 2 False" in out.stdout, out.stdout + out.stderr
    assert out.stderr.strip() == ("mrbench run: backend.local.replay_head: must be one of: model, float32, auto; "
                                  "got 'bogus'")
    assert list(tmp_path.iterdir()) == []  # no results/ folder, no record


@pytest.mark.parametrize("flag", ["--dtype", "--attention"])
def test_eval_refuses_a_bad_dtype_or_attention_at_parse(flag, capsys, tmp_path):
    from harness import cli

    with pytest.raises(SystemExit) as info:
        cli.main(["eval", "ifollow-heldout", "--model", "tiny-random", "--out", str(tmp_path / "e"), flag, "bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    allowed = C.MODEL_DTYPES if flag == "--dtype" else C.ROLLOUT_ATTENTIONS
    assert "invalid choice: 'bogus'" in err and all(repr(v) in err for v in allowed)
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("device, ok", [("auto", True), ("cpu", True), ("cuda", True), ("cuda:1", True),
                                        ("mps", True), ("gpu", False), ("cuda:", False), ("cuda:x", False)])
def test_model_device_is_checked_at_parse(device, ok):
    """A device torch would refuse only after the record is open (``gpu``) is refused here."""
    if ok:
        assert resolve(None, [("model.device", device)]).model.device == device
        return
    with pytest.raises(ConfigError) as err:
        resolve(None, [("model.device", device)])
    assert str(err.value) == f"model.device: must be one of: auto, cpu, cuda, cuda:N, mps; got {device!r}"
