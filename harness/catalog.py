"""The project's registries and their built-in entries (all lazy: nothing heavy is imported here).

Outside packages extend them through entry-point groups ``mrbench.tasks``,
``mrbench.evaluators``, ``mrbench.backends`` and ``mrbench.algorithms`` (the last one lives in
:mod:`algorithms.registry`, since algorithms are pure torch and have their own package).

A task entry resolves to a zero-argument callable returning a :class:`tasks.base.Task`; an
evaluator entry to one returning an :class:`evals.base.Evaluator`; a backend entry to the
backend class.
"""

from __future__ import annotations

from harness.registry import Registry

TASKS = Registry("task", "mrbench.tasks")
TASKS.add("toolcall", "tasks.toolcall.task:ToolCallTask",
          "tool calling in the RLLA format: format {0,1} and correctness [-3,3] rewards")
TASKS.add("text2sql", "tasks.text2sql.task:Text2SQLTask",
          "text-to-SQL on SQLite (Spider family, BIRD): format, executable, execution rewards")
TASKS.add("ifollow", "tasks.ifollow.task:InstructionFollowingTask",
          "multi-constraint instruction following: one binary reward per constraint")

EVALUATORS = Registry("evaluator", "mrbench.evaluators")
EVALUATORS.add("bfcl-v4", "evals.bfcl:BFCLv4Evaluator", "BFCL-v4 single-turn AST accuracy (non-live and live)")
for _name, _attr, _desc in [
    ("spider-dev", "spider_dev", "Spider 1.0 dev execution accuracy"),
    ("spider-test", "spider_test", "Spider 1.0 test execution accuracy (when the user has the test split)"),
    ("spider-syn", "spider_syn", "Spider-Syn dev execution accuracy"),
    ("spider-realistic", "spider_realistic", "Spider-Realistic execution accuracy"),
    ("spider-dk", "spider_dk", "Spider-DK execution accuracy"),
    ("bird-dev", "bird_dev", "BIRD dev execution accuracy (needs dev_databases/)"),
]:
    EVALUATORS.add(_name, f"evals.text2sql:{_attr}", _desc)
EVALUATORS.add("ifeval", "evals.ifollow:IFEvalEvaluator", "IFEval strict/loose prompt- and instruction-level accuracy")
EVALUATORS.add("ifbench", "evals.ifollow:IFBenchEvaluator", "IFBench strict/loose prompt- and instruction-level accuracy")
EVALUATORS.add("muldimif", "evals.ifollow:MulDimIFEvaluator", "MulDimIF accuracy")
EVALUATORS.add("ifollow-heldout", "evals.ifollow_heldout:IFollowHeldoutEvaluator",
               "held-out generated multi-constraint prompts (no data files needed; the main job's evaluation)")
EVALUATORS.add("advancedif", "evals.ifollow:AdvancedIFEvaluator",
               "AdvancedIF-style rubric grading through a configured judge")

BACKENDS = Registry("backend", "mrbench.backends")
BACKENDS.add("local", "harness.backends.local:LocalBackend",
             "in-process trainer on CPU or one GPU (transformers generate, optional vLLM)")


def registries() -> dict[str, Registry]:
    from algorithms.registry import ALGORITHMS  # imported here: algorithms import torch lazily

    return {"tasks": TASKS, "algorithms": ALGORITHMS, "backends": BACKENDS, "evaluators": EVALUATORS}
