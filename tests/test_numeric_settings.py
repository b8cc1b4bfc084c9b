"""Every numeric setting parses the way ``--help`` prints it and its errors name the field
(reliability probe 4, N1 and N2): ``--algo.eps 1e-6`` (YAML 1.1 reads it as a string) is a number;
``--algo.beta abc`` is refused under ``--algo.beta``, not ``--task.options``; inf and NaN are
refused where a finite value is needed (``--sampling.temperature inf``, ``--optim.lr inf``).
"""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from algorithms.base import ConfigError
from algorithms.catalog import get_algorithm, list_algorithms, resolve as resolve_algorithm
from harness import cli
from harness.config import RunConfig, resolve


def _numeric_fields(cls: type) -> list[tuple[str, typing.Any]]:
    hints = typing.get_type_hints(cls)
    return [(f.name, f.default) for f in dataclasses.fields(cls)
            if hints[f.name] in (float, int) and isinstance(f.default, (int, float))
            and not isinstance(f.default, bool)]


def _config_classes(name: str) -> list[type]:
    algo = resolve_algorithm(name)
    classes = [getattr(algo, "config_class", None), getattr(getattr(algo, "aggregator_class", None),
                                                            "config_class", None)]
    return [c for c in classes if dataclasses.is_dataclass(c)]


@pytest.mark.parametrize("name", list_algorithms())
def test_every_algorithm_number_parses_as_help_prints_its_default(name):
    for cls in _config_classes(name):
        for field, default in _numeric_fields(cls):
            algo = get_algorithm(name, **{field: str(default)})  # "1e-06", "0.5", "10": as --help shows
            assert algo.config_dict()[field] == default and type(algo.config_dict()[field]) is type(default)


@pytest.mark.parametrize("value", ["1e-6", "1E-6", "1.0e-6", "0.000001"])
def test_exponent_forms_of_eps_are_one_value(value):
    assert get_algorithm("grpo", eps=value).config.eps == 1e-6


@pytest.mark.parametrize("args, expected", [
    (["--algo", "mrtpo", "--algo.beta", "abc"], "algorithm 'mrtpo': --algo.beta: expected a number, got 'abc'"),
    (["--algo", "grpo", "--algo.eps", "abc"], "algorithm 'grpo': --algo.eps: expected a number, got 'abc'"),
    (["--algo", "grpo", "--algo.eps", "inf"], "algorithm 'grpo': --algo.eps: must be a finite number, got inf"),
    (["--algo", "mrtpo", "--algo.beta", "nan"], "--algo.beta: must be a finite number"),
    (["--algo", "mrtpo", "--algo.warmup_steps", "1.5"], "--algo.warmup_steps: expected an integer, got 1.5"),
    (["--sampling.temperature", "inf"], "sampling.temperature: must be a finite number > 0, got inf"),
    (["--optim.lr", "inf"], "optim.lr: must be a finite number > 0, got inf"),
    (["--optim.lr", "-inf"], "optim.lr: must be a finite number > 0, got -inf"),
])
def test_bad_numbers_are_one_line_naming_the_field(capsys, args, expected):
    assert cli.main(["run", "--model", "tiny-random", *args, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "task.options" not in err and "Traceback" not in err, err


@pytest.mark.parametrize("args", [["--algo", "grpo", "--algo.eps", "1e-6"], ["--algo", "mrtpo", "--algo.beta", "1e-1"],
                                  ["--optim.lr", "1e-5"]])
def test_exponent_forms_pass_the_dry_run(capsys, args):
    assert cli.main(["run", "--model", "tiny-random", *args, "--dry-run"]) == 0, capsys.readouterr().err


def test_every_bounded_run_setting_refuses_inf_and_nan():
    for section in dataclasses.fields(RunConfig):
        cls = typing.get_type_hints(RunConfig)[section.name]
        if not dataclasses.is_dataclass(cls):
            continue
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if hints[f.name] is not float or not f.metadata.get("bounds"):
                continue
            for bad in ("inf", "nan"):
                with pytest.raises(ValueError, match=rf"{section.name}\.{f.name}: must be a finite number"):
                    resolve(None, [(f"{section.name}.{f.name}", bad)])
    assert math.isfinite(resolve(None, [("optim.lr", "1e-5")]).optim.lr)


def test_a_config_error_is_a_value_error():
    with pytest.raises(ConfigError):
        get_algorithm("grpo", eps="x")
