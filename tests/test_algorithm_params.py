"""Algorithm parameters: every built-in field has its help text in ``mrbench run --algo NAME --help``;
names are an algorithm's own (a composite's reweighter cannot share a key with MRTPO; OPSD's JSD
weight is ``jsd_beta``, its old ``beta`` refused with the new place)."""

from __future__ import annotations

import dataclasses

import pytest

from algorithms.base import ConfigError
from algorithms.catalog import get_algorithm, list_algorithms, reweighters, shared_keys
from algorithms.registry import ALGORITHMS
from harness import cli
from harness.config_help import algorithm_fields_help
from harness.resolved import resolved_params
from mrbench_core.fields import field_help


@pytest.mark.parametrize("name", sorted(ALGORITHMS.names()))
def test_every_builtin_field_has_help(name):
    algo = get_algorithm(name)
    configs = [algo.config] + ([algo.aggregator.config] if hasattr(algo, "aggregator") else [])
    missing = [f"{type(c).__name__}.{f.name}" for c in configs for f in dataclasses.fields(c) if not field_help(f)]
    assert missing == []


def test_help_lists_each_parameter_with_its_text(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--algo", "mrtpo+saw", "--help"])
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip().startswith("--algo.")}
    assert "paper Eq. 6" in lines["--algo.beta"] and "coefficient of variation" in lines["--algo.cv_eps"]
    assert "Jensen-Shannon" in algorithm_fields_help("opsd")


def test_a_reweighter_never_shares_a_key_with_mrtpo():
    assert reweighters() and all(shared_keys(ALGORITHMS.get(n)) == [] for n in reweighters())
    assert all(name in list_algorithms() for name in ("mrtpo+saw", "mrtpo+sa-mrpo"))


def test_a_composite_whose_reweighter_declares_an_mrtpo_key_is_refused(monkeypatch):
    from algorithms import catalog
    from algorithms.gdpo import GDPO, GDPOConfig

    @dataclasses.dataclass
    class BetaConfig(GDPOConfig):
        beta: float = 0.1

    class Clashing(GDPO):
        """A plugin reweighter with a field named like MRTPO's mixing weight."""

        name = "clashing"
        config_class = BetaConfig

    entry = ALGORITHMS._entries["gdpo"].__class__("clashing", Clashing)
    monkeypatch.setitem(ALGORITHMS._entries, "clashing", entry)
    with pytest.raises(ConfigError, match="declares beta, which mrtpo declares too"):
        get_algorithm("mrtpo+clashing", beta=0.5)
    catalog._composed.pop("mrtpo+clashing", None)


def test_opsd_jsd_weight_has_its_own_name():
    assert get_algorithm("opsd", jsd_beta=0.2).config.jsd_beta == 0.2
    with pytest.raises(ConfigError, match=r"'beta' is now 'jsd_beta' \(--algo.jsd_beta\)"):
        get_algorithm("opsd", beta=0.2)
    assert get_algorithm("mrtpo", beta=0.2).config.beta == 0.2  # --algo.beta stays MRTPO's


def test_an_old_record_with_opsd_beta_reads_at_the_new_place():
    assert resolved_params("opsd", {"beta": 0.3})["jsd_beta"] == 0.3
