"""A small synthetic task for backend and replay tests (not a test module itself).

The tiny random model writes random bytes and stops with probability about 0.1 per token, so these
rewards vary within a group of four:

- ``format``: 1 when the response's first character is printable ASCII;
- ``short``: 1 when the response has fewer than 8 characters;
- ``letter``: 1 when it contains an ASCII letter (only on examples whose id ends in an even digit;
  NaN-free because such examples simply have two rewards: K varies across examples).

Each verdict carries a block (``format`` only when it failed, to exercise "no block = uniform")
and the character spans its check read: ``format`` the first character, ``short`` the whole
response, ``letter`` the ASCII letters (none when there are none), so the read-span masks of
``mrtpo-oracle`` see a partial read, a whole read and a missing one.
``TOY_NAME`` is registered in the task registry by :func:`register` for runs through the CLI.
"""

from __future__ import annotations

import copy
from typing import Any

from tasks.base import Example, Task, Verdict

TOY_NAME = "toy"
RULES = {"format": "Start with a printable character.", "short": "Keep the answer under 8 characters.",
         "letter": "Use at least one letter."}


class ToyTask(Task):
    name = TOY_NAME
    version = "1"
    format_reward = "format"

    def __init__(self, **options: Any):
        self.options = options

    def load(self, split: str = "train", data_dir: str | None = None) -> list[Example]:
        out = []
        for i in range(6):
            names = ["format", "short"] + (["letter"] if i % 2 == 0 else [])
            rules = " ".join(RULES[n] for n in names)
            out.append(Example(id=f"toy-{i}", messages=[{"role": "user", "content": f"Task {i}: say hi. {rules}"}],
                               reward_names=names))
        return out

    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None) -> Example:
        return Example(id=str(row["id"]), messages=row["messages"], reward_names=list(row["reward_names"]))

    def score(self, example: Example, response: str) -> list[Verdict]:
        out = []
        for name in example.reward_names:
            if name == "format":
                ok = bool(response) and 32 <= ord(response[0]) < 127
                out.append(Verdict(name, float(ok), "first char", None if ok else RULES[name],
                                   spans=[(0, 1)] if response else []))
            elif name == "short":
                ok = len(response) < 8
                out.append(Verdict(name, float(ok), f"{len(response)} chars", RULES[name],
                                   spans=[(0, len(response))] if response else []))
            else:
                letters = [(i, i + 1) for i, c in enumerate(response) if c.isascii() and c.isalpha()]
                out.append(Verdict(name, float(bool(letters)), "letters", RULES[name], spans=letters))
        return out

    def without_rubric(self, example: Example) -> list[dict[str, str]]:
        msgs = copy.deepcopy(example.messages)
        msgs[-1]["content"] = msgs[-1]["content"].split(".")[0] + "."
        return msgs

    def teacher_messages(self, example: Example) -> list[dict[str, str]]:
        return [{"role": "user", "content": "Reference answer: hi"}, {"role": "assistant", "content": "hi"},
                *copy.deepcopy(example.messages)]


def register() -> None:
    from tasks.registry import TASKS

    if TOY_NAME not in TASKS:
        TASKS.add(TOY_NAME, ToyTask, "synthetic test task")


def tiny_config(tmp_dir: str, algo: str = "mrtpo", steps: int = 2, **overrides: Any) -> Any:
    """A RunConfig for the tiny model on the toy task, writing under ``tmp_dir``."""
    from harness.config import from_dict

    data: dict[str, Any] = {
        "task": {"name": TOY_NAME}, "algo": {"name": algo, "params": {}},
        "model": {"name": "tiny-random", "dtype": "float32"},
        "sampling": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 12},
        "optim": {"lr": 1e-2, "micro_batch_size": 3},
        "schedule": {"steps": steps, "checkpoint_every": 1, "log_samples": 2},
        "output": {"dir": tmp_dir}, "seed": 0,
    }
    if algo.startswith("mrtpo"):
        data["algo"]["params"] = {"warmup_steps": 0}
    for dotted, value in overrides.items():
        node = data
        parts = dotted.split("__")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return from_dict(data)


def train_run(cfg: Any, task: Any = None, finish: bool = False) -> tuple[Any, Any, Any]:
    """Train ``cfg`` on the local backend into its record (opened, and unlocked afterwards), on the toy
    task unless ``task`` is given; ``finish`` also marks the record finished with the summary.
    Returns (backend, record, summary)."""
    from harness.backends.local import LocalBackend
    from harness.records import RunRecord

    backend = LocalBackend(cfg, task=task if task is not None else ToyTask())
    rec = RunRecord.open(cfg)
    try:
        summary = backend.train(rec)
        if finish:
            rec.finish(summary)
    finally:
        rec.unlock()
    return backend, rec, summary


def sigterm_after_step(monkeypatch: Any, step: int) -> Any:
    """Make the run loop act as on a SIGTERM arriving during 0-based step ``step`` (its handler sets
    ``stop``): that step finishes, is checkpointed, and the loop raises. Returns the real ``run_step``."""
    from harness.training.run_loop import RunLoop

    original = RunLoop.run_step

    def signalled(self: Any, n: int, *args: Any, **kwargs: Any) -> Any:
        row = original(self, n, *args, **kwargs)
        if n == step:
            self.stop = "SIGTERM"
        return row

    monkeypatch.setattr(RunLoop, "run_step", signalled)
    return original
