"""``mrbench run --help`` lists every config field from the dataclass definitions, and
``mrbench config show`` prints the resolved config that the record's config.json holds."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from harness import cli
from harness.config import resolve
from harness.config_help import FieldDoc, config_fields


def _help(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        cli.main([*args, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def _line(text: str, flag: str) -> str:
    (line,) = [ln for ln in text.splitlines() if re.match(rf"\s+{re.escape(flag)} \S+ = ", ln)]
    return line


def test_run_help_shows_each_field_with_type_default_and_description(capsys):
    out = _help(capsys, "run")
    lr = _line(out, "--optim.lr")
    assert "float = 1e-05" in lr and "learning rate" in lr
    group = _line(out, "--sampling.group_size")
    assert "int = 8" in group and "responses sampled per prompt" in group
    threads = _line(out, "--backend.local.threads")
    assert "int = 0" in threads and "CPU intra-op threads" in threads
    assert "= [0.9, 0.999]" in _line(out, "--optim.betas")
    assert "int|null = null" in _line(out, "--sampling.top_k")
    for doc in config_fields():  # every field, with the help its definition carries
        if isinstance(doc, FieldDoc):
            assert doc.help in _line(out, f"--{doc.path}"), doc.path
    assert "mrbench run --algo gdpo --help" in " ".join(out.split())  # how to see the algorithm's parameters


def test_run_help_lists_the_named_algorithms_parameters(capsys):
    out = _help(capsys, "run", "--algo", "mrtpo-shuffled")
    assert "algorithm mrtpo-shuffled parameters" in out
    assert "float = 0.5" in _line(out, "--algo.beta") and "int = 0" in _line(out, "--algo.seed")
    assert "base seed of the per-step permutations" in out  # the config's own description
    out = _help(capsys, "run", "--algo=nosuch")
    assert "unknown algorithm 'nosuch'" in out and "mrtpo" in out


def test_config_show_prints_the_recorded_config_as_yaml(tmp_path, capsys):
    from harness.records import RunRecord

    args = ["--config", "toolcall-paper", "--optim.lr", "2e-6", "--seed", "3", "--output.dir", str(tmp_path / "r")]
    assert cli.main(["config", "show", *args]) == 0
    out = capsys.readouterr().out
    assert "  lr: 2.0e-06" in out.splitlines()
    shown = yaml.safe_load(out)
    cfg = resolve("toolcall-paper", [("optim.lr", "2e-6"), ("seed", "3"), ("output.dir", str(tmp_path / "r"))])
    from harness.resolved import resolved_params

    cfg.algo.params = resolved_params(cfg.algo.name, cfg.algo.params)  # as the runner records it
    rec = RunRecord.open(cfg)
    try:
        assert shown == json.loads((rec.path / "config.json").read_text())
    finally:
        rec.unlock()
    assert shown["optim"]["lr"] == 2e-6 and shown["seed"] == 3 and shown["task"]["name"] == "toolcall"


@pytest.mark.parametrize("args, message", [
    (["--sampling.group_size", "2.5"], "sampling.group_size: expected an integer"),
    (["--backend.threads", "1"], "backend.threads: moved to backend.local.threads"),
    (["--optim.lrr", "1"], "optim.lrr: unknown field; known fields of optim: lr"),
    (["--config", "no-such-recipe"], "recipe 'no-such-recipe' not found"),
])
def test_config_show_rejects_bad_values_naming_the_field(args, message, capsys):
    assert cli.main(["config", "show", *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_config_show_takes_the_run_shortcuts(capsys):
    assert cli.main(["config", "show", "--task", "toolcall", "--algo", "gdpo", "--model", "m", "--backend", "local",
                     "--seed", "5", "--algo.eps", "0.01", "--backend.local.threads", "1"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert (shown["task"]["name"], shown["algo"]["name"], shown["model"]["name"], shown["seed"]) == (
        "toolcall", "gdpo", "m", 5)
    assert shown["algo"]["params"]["eps"] == 0.01 and shown["algo"]["params"]["rescale"] == "paper"  # resolved
    assert shown["backend"]["name"] == "local" and shown["backend"]["local"]["threads"] == 1
