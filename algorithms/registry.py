"""The algorithm registry: one row per built-in, naming the object that registers itself there.

Each algorithm registers itself where it is defined (``@ALGORITHMS.register("grpo")``); the rows
below say which object that is (``"grpo": "algorithms.grpo:GRPO"``), so that looking one name up
imports that module alone, and registration checks that the row and the decorator agree (and
sets the class's ``name``). Derived names (``mrtpo+<reweighter>``, ``mrtpo-oracle+<reweighter>``)
and instantiation live in
:mod:`algorithms.catalog`; this module imports no other module of ``algorithms``.
"""

from __future__ import annotations

from mrbench_core.registry import Registry

ALGORITHMS = Registry("algorithm", "mrbench.algorithms", base="algorithms.base:Algorithm")

BUILTINS = {
    "grpo": "algorithms.grpo:GRPO",
    "gdpo": "algorithms.gdpo:GDPO",
    "saw": "algorithms.reweight:SAW",
    "dara": "algorithms.reweight:DARA",
    "dvao": "algorithms.reweight:DVAO",
    "gd2po": "algorithms.reweight:GD2PO",
    "sa-mrpo": "algorithms.reweight:SAMRPO",
    "mrtpo": "algorithms.mrtpo:MRTPO",
    "mrtpo-joint": "algorithms.mrtpo:MRTPOJoint",
    "mrtpo-shuffled": "algorithms.mrtpo:MRTPOShuffled",
    "mrtpo-oracle": "algorithms.mrtpo:MRTPOOracle",
    "cort": "algorithms.cort:CoRT",
    "opsd": "algorithms.opsd:OPSD",
    "forking": "algorithms.entropy_credit:Forking",
    "forking-summed": "algorithms.entropy_credit:ForkingSummed",
    "gtpo": "algorithms.entropy_credit:GTPO",
    "gtpo-summed": "algorithms.entropy_credit:GTPOSummed",
    "ktae": "algorithms.ktae:KTAE",
    "ktae-summed": "algorithms.ktae:KTAESummed",
    "sdpo": "algorithms.sdpo:SDPO",
}
for _name, _spec in BUILTINS.items():
    ALGORITHMS.lazy(_name, _spec)
