"""The evaluator registry: each evaluator registers itself where it is defined
(``@EVALUATORS.register("bfcl-v4")``); the table below only says which module defines each
built-in. An entry resolves to a zero-argument callable returning an :class:`evals.base.Evaluator`;
its description is the first line of that callable's docstring."""

from __future__ import annotations

from mrbench_core.registry import Registry

EVALUATORS = Registry("evaluator", "mrbench.evaluators")

for _name, _module in [
    ("bfcl-v4", "evals.bfcl"),
    ("spider-dev", "evals.text2sql"), ("spider-test", "evals.text2sql"), ("spider-syn", "evals.text2sql"),
    ("spider-realistic", "evals.text2sql"), ("spider-dk", "evals.text2sql"), ("bird-dev", "evals.text2sql"),
    ("ifeval", "evals.ifollow"), ("ifbench", "evals.ifollow"), ("muldimif", "evals.ifollow"),
    ("advancedif", "evals.ifollow_judge"), ("ifollow-heldout", "evals.ifollow_heldout"),
]:
    EVALUATORS.lazy(_name, _module)


def make_evaluator(name: str):
    """A fresh evaluator; unknown names list the known ones."""
    return EVALUATORS.get(name)()


def evaluator_task(name: str) -> str:
    """The task whose prompt format an evaluator uses (``Evaluator.task``)."""
    return make_evaluator(name).task
