"""The per-reward diagnostics of every built-in algorithm, pinned bit for bit on one fixed synthetic batch.

``tests/data/diagnostics_golden.json`` holds, for each case (an algorithm with its parameters at a
step), the ``reward/*``, ``adv/*``, ``credit/*`` and ``frac_groups_no_signal`` entries that
:func:`algorithms.diagnostics.batch_diagnostics` gives on :func:`golden_batch`, computed from the
step's own :class:`~algorithms.base.Advantages` and computed afresh. The file was written before the
per-reward split became a method of each algorithm family, so this test says that the change left
every value as it was. Bit for bit on the kind of host it was written on (the device class in
``tests/data/diagnostics_golden.device.txt``, :func:`harness.numerics.device_class`); another kind of
CPU may round a float32 sum's last bit differently (an Intel Xeon with AMX gives DVAO's
``adv/correctness/mean`` as -0.15713486526951645 against -0.15713487971912732), so there values agree
to 1e-6 relative. Regenerate it only on purpose::

    PYTHONPATH=. python tests/test_diagnostics_golden.py   # rewrites tests/data/diagnostics_golden.json
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from algorithms import RolloutBatch, get_algorithm, list_algorithms
from algorithms.diagnostics import batch_diagnostics, name_index, reward_contributions

GOLDEN = Path(__file__).parent / "data" / "diagnostics_golden.json"
NAMES = ("format", "correctness", "length")
LENGTHS = (6, 4, 1, 5, 6, 3, 2, 6)  # valid tokens of each response
GROUPS = (0, 0, 0, 1, 1, 1, 2, 2)
STEPS = (0, 6)  # before any warm-up has begun, and part-way through MRTPO's (N = 10)
#: parameter variants beyond each algorithm's defaults: a rescale with a shift, no warm-up, no bound,
#: weights by name
VARIANTS = {"gdpo": [{"rescale": "trl"}, {"rescale": "verl", "weights": {"format": 2.0}}],
            "grpo": [{"weights": [1.0, 0.5, 2.0]}],
            "mrtpo": [{"warmup_steps": 0}, {"warmup_steps": 0, "bound": False, "rescale": "trl"}],
            "mrtpo-joint": [{"warmup_steps": 0}], "mrtpo+saw": [{"warmup_steps": 0}]}


def golden_batch(step: int) -> tuple[RolloutBatch, torch.Tensor, torch.Tensor]:
    """(batch, read[B,K,T], read_known[B,K]): three groups, three rewards (the third absent from two
    responses, one of them negative-capable for SAW's shift), random relevance with two pairs not
    replayed, a joint profile, a log-prob change with one token not replayed, read masks, and the
    token entropies and ids of the token-credit methods."""
    gen = torch.Generator().manual_seed(32)
    B, K, T = len(LENGTHS), len(NAMES), max(LENGTHS)
    mask = torch.tensor([[t < n for t in range(T)] for n in LENGTHS])
    rewards = torch.tensor([[1.0, 0.0, 0.5], [0.0, 1.0, -0.5], [1.0, 1.0, 0.5],
                            [1.0, 0.0, float("nan")], [1.0, 0.0, 0.25], [1.0, 1.0, 0.25],
                            [0.0, 1.0, float("nan")], [1.0, 1.0, 0.75]])
    relevance = torch.rand(B, K, T, generator=gen)
    relevance[1, 0] = float("nan")
    relevance[4, 2] = float("nan")
    joint = torch.rand(B, T, generator=gen)
    delta = torch.randn(B, T, generator=gen)
    delta[2, 0] = float("nan")
    read = torch.rand(B, K, T, generator=gen) > 0.5
    known = torch.rand(B, K, generator=gen) > 0.3
    entropy = torch.rand(B, T, generator=gen) * 3  # drawn after the others: their values are as they were
    ids = torch.randint(0, 4, (B, T), generator=gen)
    batch = RolloutBatch(rewards=rewards, group_ids=torch.tensor(GROUPS), response_mask=mask,
                         relevance=relevance, step=step, joint_relevance=joint, logprob_delta=delta,
                         reward_low=torch.tensor([0.0, 0.0, -1.0]), reward_names=NAMES, total_steps=20,
                         token_entropy=entropy, token_ids=ids)
    return batch, read, known


def cases() -> list[tuple[str, str, dict]]:
    """(case id, algorithm, parameters) for every built-in algorithm at each step, and the variants."""
    out = []
    for name in list_algorithms():
        for params in [{}, *VARIANTS.get(name, [])]:
            for step in STEPS:
                out.append((f"{name} {json.dumps(params, sort_keys=True)} step={step}", name, params))
    return out


def diagnostics(name: str, params: dict, step: int, reuse: bool) -> dict[str, float]:
    """The diagnostics of ``name`` on the golden batch, from the step's result or computed afresh."""
    batch, read, known = golden_batch(step)
    algo = get_algorithm(name, **params)
    result = algo.advantages(batch) if reuse else None
    ids, names = name_index([list(NAMES)] * batch.num_responses, batch.num_rewards)
    return batch_diagnostics(batch, ids, names, reward_contributions(algo, batch, result), read, known)


def _step(case_id: str) -> int:
    return int(case_id.rsplit("step=", 1)[1])


WRITTEN_ON = GOLDEN.with_suffix(".device.txt")


def _this_device_class() -> str:
    from harness.numerics import device_class, device_info

    return device_class(device_info(torch.device("cpu")))


EXACT = _this_device_class() == WRITTEN_ON.read_text().strip()


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b if EXACT else math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


@pytest.fixture(scope="module")
def golden() -> dict[str, dict[str, float]]:
    return json.loads(GOLDEN.read_text())


def test_the_golden_file_covers_every_builtin_algorithm(golden):
    assert sorted(golden) == sorted(case_id for case_id, _, _ in cases())


@pytest.mark.parametrize("reuse", [True, False], ids=["from-the-step", "afresh"])
@pytest.mark.parametrize("case_id, name, params", cases(), ids=[c[0] for c in cases()])
def test_diagnostics_are_bit_identical_to_the_golden_values(golden, case_id, name, params, reuse):
    expected = golden[case_id]
    got = diagnostics(name, params, _step(case_id), reuse)
    assert sorted(got) == sorted(expected)
    changed = {k: (got[k], expected[k]) for k in expected if not _same(got[k], expected[k])}
    assert not changed, f"{case_id}: values changed (got, expected): {changed}"


def write_golden() -> None:
    values = {}
    for case_id, name, params in cases():
        fresh = diagnostics(name, params, _step(case_id), reuse=False)
        reused = diagnostics(name, params, _step(case_id), reuse=True)
        assert fresh.keys() == reused.keys() and all(_same(fresh[k], reused[k]) for k in fresh), case_id
        values[case_id] = fresh
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(values, indent=0, sort_keys=True) + "\n")
    WRITTEN_ON.write_text(_this_device_class() + "\n")


if __name__ == "__main__":
    write_golden()
