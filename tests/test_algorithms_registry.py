"""The algorithm registry: lazy entries, every name of the design, derived composites, strict names and keys."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from algorithms import RolloutBatch, get_algorithm, list_algorithms
from algorithms.base import ConfigError, ReplayRequest
from mrbench_core.registry import UnknownNameError

DESIGN_NAMES = ["grpo", "gdpo", "saw", "dara", "dvao", "gd2po", "sa-mrpo", "mrtpo", "mrtpo+saw", "mrtpo+dara",
                "mrtpo+dvao", "mrtpo+gd2po", "mrtpo+sa-mrpo", "mrtpo-joint", "mrtpo-shuffled", "cort", "opsd",
                "forking", "forking-summed", "gtpo", "gtpo-summed", "ktae", "ktae-summed", "sdpo"]
REPLAY = {"mrtpo": "leave_one_out", "mrtpo+saw": "leave_one_out", "mrtpo-shuffled": "leave_one_out",
          "mrtpo-joint": "joint", "cort": "rubric", "opsd": "teacher", "forking": "entropy",
          "forking-summed": "entropy", "gtpo": "entropy", "gtpo-summed": "entropy", "ktae": "token_ids",
          "ktae-summed": "token_ids", "sdpo": "feedback"}


def test_every_design_name_is_listed() -> None:
    assert set(DESIGN_NAMES) <= set(list_algorithms())  # plugins may add more


def test_looking_names_up_does_not_import_torch() -> None:
    code = ("import sys, algorithms, algorithms.registry as r; names = r.ALGORITHMS.names(); "
            "assert 'torch' not in sys.modules, 'torch imported'; print(len(names))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.strip()) >= 12


def test_every_algorithm_has_a_description() -> None:
    from algorithms.catalog import describe_algorithms

    described = dict(describe_algorithms())
    assert set(DESIGN_NAMES) <= set(described) and all(described.values()), described


def test_composites_are_derived_from_registered_reweighters(monkeypatch) -> None:
    from algorithms import catalog, registry
    from algorithms.gdpo import GDPO
    from algorithms.mrtpo import MRTPO

    class Halved(GDPO):
        """GDPO with every advantage halved (a plugin reweighter)."""

        name = "halved"

    monkeypatch.setitem(registry.ALGORITHMS._entries, "halved", registry.ALGORITHMS._entries["gdpo"].__class__(
        "halved", Halved))
    assert "mrtpo+halved" in list_algorithms()
    algo = get_algorithm("mrtpo+halved", beta=0.5)
    assert isinstance(algo, MRTPO) and algo.aggregator_class is Halved and algo.name == "mrtpo+halved"
    catalog._composed.pop("mrtpo+halved", None)


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_each_algorithm_builds_and_runs(name: str) -> None:
    algo = get_algorithm(name)
    assert algo.name == name
    assert algo.replay_request == REPLAY.get(name, "leave_one_out" if name.startswith("mrtpo") else "none")
    assert isinstance(algo.replay_request, ReplayRequest)
    B, K, T = 4, 2, 3
    batch = RolloutBatch(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]), torch.tensor([0, 0, 1, 1]),
                         torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]]).bool(), torch.rand(B, K, T), 20,
                         joint_relevance=torch.rand(B, T), logprob_delta=torch.randn(B, T),
                         token_entropy=torch.rand(B, T), token_ids=torch.randint(0, 4, (B, T)))
    adv = algo.token_advantages(batch)
    assert adv.shape == (B, T) and torch.all(adv[~batch.response_mask] == 0)
    metrics = algo.advantages(batch).metrics
    assert all(isinstance(v, float) for v in metrics.values()), metrics
    assert isinstance(algo.config_dict(), dict)


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(UnknownNameError) as info:
        get_algorithm("ppo")
    assert "grpo" in str(info.value) and "mrtpo+saw" in str(info.value)
    with pytest.raises(UnknownNameError, match="not a registered response-level reweighter"):
        get_algorithm("mrtpo+cort")


def test_unknown_config_key_lists_accepted_ones() -> None:
    with pytest.raises(ConfigError, match="accepted keys: .*eps"):
        get_algorithm("grpo", beta=0.5)
    with pytest.raises(ConfigError, match="cv_shift"):
        get_algorithm("mrtpo+saw", bogus=1)
    for name, bad in [("mrtpo", {"beta": 1.0}), ("gdpo", {"rescale": "batch"}), ("dara", {"cap": 0.5})]:
        with pytest.raises(ConfigError):
            get_algorithm(name, **bad)


def test_composite_splits_its_config() -> None:
    algo = get_algorithm("mrtpo+saw", beta=0.3, cv_shift=(0.0, 3.0), rescale="verl")
    assert algo.config.beta == 0.3 and algo.aggregator.config.cv_shift == (0.0, 3.0)
    assert algo.config_dict()["rescale"] == "verl" and algo.config_dict()["beta"] == 0.3


def test_batch_validation() -> None:
    with pytest.raises(ValueError, match="relevance"):
        RolloutBatch(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool),
                     torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="group_ids"):
        RolloutBatch(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool))
