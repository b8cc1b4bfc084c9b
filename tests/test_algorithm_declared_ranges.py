"""Algorithm parameters declare their range where they are declared (``setting(ge=..., lt=...,
choices=...)``), for every algorithm, composites (``mrtpo+saw``, ``mrtpo-oracle+...``) included:
a value just outside it is refused naming the algorithm, ``--algo.KEY`` and the range; the edge
inside passes; ``mrbench run --algo NAME --help`` prints the range, and no help text writes it
again by hand."""

from __future__ import annotations

import dataclasses
import re

import pytest

from algorithms.base import ConfigError
from algorithms.catalog import get_algorithm, list_algorithms
from harness import cli
from mrbench_core.fields import range_text

NAMES = list_algorithms()


def declared_fields(name: str) -> list[dataclasses.Field]:
    """The parameters ``--algo.KEY`` sets for ``name``: its own config's, and a composite's
    aggregator's (mrtpo+saw takes SAW's)."""
    algo = get_algorithm(name)
    configs = [algo.config] + ([algo.aggregator.config] if hasattr(algo, "aggregator") else [])
    return [f for c in configs for f in dataclasses.fields(c)]


def outside_and_edge(f: dataclasses.Field) -> list[tuple[object, object]]:
    """(a value just outside, the nearest value inside) for each bound and the choices of ``f``."""
    out = []
    bounds = f.metadata.get("bounds") or {}
    integer = f.type in ("int", "int | None")
    step = 1 if integer else 1e-3
    for key, inside_edge in (("ge", 0), ("le", 0), ("gt", step), ("lt", -step)):
        if key in bounds:
            limit = bounds[key]
            outside = limit - step if key == "ge" else limit + step if key == "le" else limit
            out.append((outside, limit + inside_edge))
    if f.metadata.get("choices"):
        out.append(("bogus", f.metadata["choices"][-1]))
    return out


CASES = [(name, f.name, bad, good) for name in NAMES for f in declared_fields(name)
         for bad, good in outside_and_edge(f)]


def test_the_bounds_cover_every_algorithm_family():
    """Each built-in family declares ranges; the composites inherit their components' ones."""
    bounded = {name for name, *_ in CASES}
    assert {"mrtpo", "gdpo", "grpo", "cort", "opsd", "dara", "dvao", "gd2po", "sa-mrpo", "saw", "forking",
            "forking-summed", "gtpo", "gtpo-summed", "ktae", "ktae-summed", "sdpo"} <= bounded
    assert {n for n in NAMES if "+" in n} <= bounded
    keys = {(name, key) for name, key, *_ in CASES}
    assert {("mrtpo", "beta"), ("mrtpo+sa-mrpo", "alpha"), ("mrtpo-oracle+dara", "cap"), ("cort", "aggregate"),
            ("opsd", "jsd_beta"), ("mrtpo+gd2po", "rescale"), ("forking", "rho"), ("gtpo", "alpha_2"),
            ("gtpo-summed", "alpha_1"), ("ktae", "scale"), ("ktae-summed", "fisher_weight"), ("ktae", "rescale"),
            ("forking-summed", "eps"), ("sdpo", "clip")} <= keys


@pytest.mark.parametrize("name, key, bad, good", CASES, ids=[f"{n}.{k}={b}" for n, k, b, _ in CASES])
def test_a_value_outside_the_declared_range_is_refused_naming_the_field(name, key, bad, good):
    field = {f.name: f for f in declared_fields(name)}[key]
    with pytest.raises(ConfigError) as err:
        get_algorithm(name, **{key: bad})
    assert str(err.value).startswith(f"algorithm {name!r}: --algo.{key}: must be {range_text(field)}")
    get_algorithm(name, **{key: good})  # the edge inside the range passes


@pytest.mark.parametrize("name", NAMES)
def test_every_default_is_inside_its_range_and_no_help_writes_a_range(name):
    algo = get_algorithm(name)  # the defaults build
    for f in declared_fields(name):
        help_text = f.metadata.get("help", "")
        assert not re.search(r"in \[|\((>=|<=|>|<) ?\d", help_text), f"{name}.{f.name}: range in the help text"
    assert algo.config_dict()


@pytest.mark.parametrize("args, message", [
    ({"beta": 1.0}, "algorithm 'mrtpo': --algo.beta: must be >= 0 and < 1, got 1.0"),
    ({"beta": "inf"}, "algorithm 'mrtpo': --algo.beta: must be a finite number, got inf"),
    ({"beta": "abc"}, "algorithm 'mrtpo': --algo.beta: expected a number, got 'abc'"),
    ({"rescale": "bogus"}, "algorithm 'mrtpo': --algo.rescale: must be one of: paper, verl, trl, none; got 'bogus'"),
])
def test_mrtpo_messages(args, message):
    with pytest.raises(ConfigError) as err:
        get_algorithm("mrtpo", **args)
    assert str(err.value) == message


@pytest.mark.parametrize("name, args, message", [
    ("mrtpo+sa-mrpo", {"low": [0.0]}, "algorithm 'mrtpo+sa-mrpo': --algo.low and --algo.high must be given together"),
    ("cort", {"aggregate": "grpo", "rescale": "trl"},
     "algorithm 'cort': --algo.rescale / --algo.rescale_eps apply only to --algo.aggregate gdpo"),
])
def test_the_constraints_between_fields_name_the_algorithm_and_the_fields(name, args, message):
    with pytest.raises(ConfigError) as err:
        get_algorithm(name, **args)
    assert str(err.value).startswith(message)


def test_run_help_prints_each_parameters_range(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--algo", "mrtpo", "--help"])
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("--algo.")}
    assert lines["--algo.beta"].endswith("[>= 0 and < 1]")
    assert lines["--algo.warmup_steps"].endswith("[>= 0]")
    assert lines["--algo.rescale"].endswith("[one of: paper, verl, trl, none]")
    assert not lines["--algo.bound"].endswith("]")  # a bool declares no range
