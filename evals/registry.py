"""The evaluator registry: each evaluator registers itself where it is defined
(``@EVALUATORS.register("bfcl-v4")``); the table below names the object each built-in is
(registration checks that the two agree). An entry resolves to a zero-argument callable returning an :class:`evals.base.Evaluator`;
its description is the first line of that callable's docstring."""

from __future__ import annotations

from mrbench_core.registry import Registry

EVALUATORS = Registry("evaluator", "mrbench.evaluators", base="evals.base:Evaluator")

BUILTINS = {
    "bfcl-v4": "evals.bfcl:BFCLv4Evaluator",
    "spider-dev": "evals.text2sql:spider_dev",
    "spider-test": "evals.text2sql:spider_test",
    "spider-syn": "evals.text2sql:spider_syn",
    "spider-realistic": "evals.text2sql:spider_realistic",
    "spider-dk": "evals.text2sql:spider_dk",
    "bird-dev": "evals.text2sql:bird_dev",
    "ifeval": "evals.ifollow:IFEvalEvaluator",
    "ifbench": "evals.ifollow:IFBenchEvaluator",
    "muldimif": "evals.ifollow:MulDimIFEvaluator",
    "advancedif": "evals.ifollow_judge:AdvancedIFEvaluator",
    "ifollow-heldout": "evals.ifollow_heldout:IFollowHeldoutEvaluator",
}
for _name, _spec in BUILTINS.items():
    EVALUATORS.lazy(_name, _spec)


def make_evaluator(name: str):
    """A fresh evaluator; unknown names list the known ones."""
    return EVALUATORS.get(name)()


def evaluator_task(name: str) -> str:
    """The task whose prompt format an evaluator uses (``Evaluator.task``)."""
    return make_evaluator(name).task
