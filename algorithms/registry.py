"""The algorithm registry: every built-in entry is a lazy "module:attr" string, so importing this
module (``mrbench list``) does not import torch.

An entry resolves to an :class:`algorithms.base.Algorithm` subclass (or a factory) called with the
algorithm's config keys. ``mrtpo+<name>`` for a reweighter that is not listed here (an outside
plugin registered in the ``mrbench.algorithms`` entry-point group) is composed on demand.
"""

from __future__ import annotations

from typing import Any

from harness.registry import Registry, UnknownNameError

ALGORITHMS = Registry("algorithm", "mrbench.algorithms")

_BUILTIN = [
    ("grpo", "algorithms.grpo:GRPO", "group z-score of the summed reward, no batch rescale"),
    ("gdpo", "algorithms.gdpo:GDPO", "per-reward group z-scores, weighted sum, batch rescale (Eq. 2)"),
    ("saw", "algorithms.reweight:SAW", "GDPO with reward weights from each reward's batch coefficient of variation"),
    ("dara", "algorithms.reweight:DARA", "GDPO with capped boosts of the positive advantages of sparse rewards"),
    ("dvao", "algorithms.reweight:DVAO", "per-group variance-weighted reward ratio, no batch rescale"),
    ("gd2po", "algorithms.reweight:GD2PO", "GDPO dropping responses whose reward advantages disagree in sign"),
    ("sa-mrpo", "algorithms.reweight:SAMRPO", "GDPO discounting rewards by their saturation in the batch"),
    ("mrtpo", "algorithms.mrtpo:MRTPO", "per-reward token weights from leave-one-out replay relevance (Eq. 6-8)"),
    ("mrtpo+saw", "algorithms.mrtpo:MRTPO_SAW", "MRTPO token weighting on SAW's weighted reward advantages"),
    ("mrtpo+dara", "algorithms.mrtpo:MRTPO_DARA", "MRTPO token weighting on DARA's reward advantages"),
    ("mrtpo+dvao", "algorithms.mrtpo:MRTPO_DVAO", "MRTPO token weighting on DVAO's reward contributions"),
    ("mrtpo+gd2po", "algorithms.mrtpo:MRTPO_GD2PO", "MRTPO token weighting on GD2PO's kept responses"),
    ("mrtpo+sa-mrpo", "algorithms.mrtpo:MRTPO_SAMRPO", "MRTPO token weighting on SA-MRPO's discounted rewards"),
    ("mrtpo-joint", "algorithms.mrtpo:MRTPOJoint", "ablation: one joint relevance profile on the summed advantage"),
    ("mrtpo-shuffled", "algorithms.mrtpo:MRTPOShuffled", "ablation: MRTPO weights permuted within each response"),
    ("cort", "algorithms.cort:CoRT", "token weights from the log-prob change when the rubric is removed"),
    ("opsd", "algorithms.opsd:OPSD", "on-policy self-distillation: generalised JSD to a privileged teacher"),
]
for _name, _target, _desc in _BUILTIN:
    ALGORITHMS.add(_name, _target, _desc)

COMPOSITE_PREFIX = "mrtpo+"


def list_algorithms() -> list[str]:
    """Every registered algorithm name, composites included, sorted."""
    return ALGORITHMS.names()


def _resolve(name: str) -> Any:
    if name in ALGORITHMS or not name.startswith(COMPOSITE_PREFIX):
        return ALGORITHMS.get(name)  # raises UnknownNameError listing the known names
    inner = name[len(COMPOSITE_PREFIX):]
    from algorithms.gdpo import Reweighter
    from algorithms.mrtpo import compose

    target = ALGORITHMS.get(inner) if inner in ALGORITHMS else None
    if not (isinstance(target, type) and issubclass(target, Reweighter)):
        known = ", ".join(list_algorithms())
        raise UnknownNameError(f"unknown algorithm {name!r}: {inner!r} is not a registered response-level "
                               f"reweighter; known algorithms: {known}")
    return compose(target)


def get_algorithm(name: str, **config: Any) -> Any:
    """Instantiate algorithm ``name`` with its config keys; unknown names and keys are errors
    that list the known ones."""
    return _resolve(name)(**config)
