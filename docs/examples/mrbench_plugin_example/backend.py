"""The ``example-canned`` backend: no language model, the whole backend contract.

Its policy is a softmax over a fixed list of candidate responses, one logit each. A training
step draws ``prompts_per_step`` examples, samples ``group_size`` candidates for each, scores them
with the task's verifiers, asks the algorithm for token advantages (a token is a
whitespace-separated word) and takes one policy-gradient step on the logits with each response's
mean token advantage. It writes a metrics row and sample rows per step, checkpoints the step
counter and the logits, and on SIGTERM/SIGINT checkpoints and raises ``KeyboardInterrupt``.
``generate`` returns the most likely candidate (greedy).

Options, under ``backend.options.example-canned``: ``responses`` (the candidates) and ``lr``.
It runs no replay, so only algorithms whose replay kind is ``none`` fit (pre-flight refuses
the others before the run starts).
"""

from __future__ import annotations

import json
import math
import random
import signal
import time
from typing import Any

import torch

from algorithms.base import RolloutBatch
from harness.backends.base import Backend
from harness.backends.step_metrics import run_summary
from mrbench_core.jsonio import atomic_write_json
from mrbench_core.replay_kinds import ReplayRequest
from mrbench_core.seeds import SAMPLING, stream_seed
from tasks.data_source import load_examples

DEFAULTS = {"responses": ["OK.", "I cannot help with that.", "Here is a long and careful answer to your request."],
            "lr": 0.5}
STATE_FILE = "canned.json"


class CannedBackend(Backend):
    """Model-free backend: a softmax policy over canned responses, trained by policy gradient."""

    name = "example-canned"
    supported_replays = frozenset({ReplayRequest.NONE})
    honours = frozenset({"task.data_dir", "task.split", "task.limit", "sampling.prompts_per_step",
                         "sampling.group_size", "schedule.steps", "schedule.checkpoint_every", "schedule.log_samples",
                         "seed", "backend.options.example-canned"})  # pre-flight refuses any other setting given

    def __init__(self, cfg: Any, task: Any | None = None, algorithm: Any | None = None):
        super().__init__(cfg, task, algorithm)
        options = dict(cfg.backend.options.get(self.name, {}))
        unknown = sorted(set(options) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"backend.options.{self.name}: unknown option(s) {unknown}; known: {sorted(DEFAULTS)}")
        self.options = {**DEFAULTS, **options}
        self.responses = [str(r) for r in self.options["responses"]]
        if not self.responses:
            raise ValueError(f"backend.options.{self.name}.responses: give at least one response")
        self.logits = torch.zeros(len(self.responses))
        self._stop: str | None = None

    def generate(self, messages_list: list[list[dict[str, str]]], max_new_tokens: int) -> list[str]:
        best = self.responses[int(self.logits.argmax())]
        return [" ".join(best.split()[:max_new_tokens]) for _ in messages_list]

    # -- training -----------------------------------------------------------------------------
    def train(self, record: Any) -> dict[str, Any]:
        cfg, t_run = self.cfg, time.time()
        examples = load_examples(self.task, cfg.task.split, cfg.task.data_dir, cfg.task.limit, cfg.seed)
        if not examples:
            raise ValueError(f"task {cfg.task.name!r} loaded no {cfg.task.split!r} examples")
        record.start(seed=cfg.seed, task_version=str(self.task.version), data_hash=self.task.data_hash(examples),
                     extra={"backend": self.name, "candidates": len(self.responses)})
        start = self._resume(record)
        record.truncate_metrics(start)
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            for n in range(start, cfg.schedule.steps):
                self._step(n, examples, record)
                every = cfg.schedule.checkpoint_every
                if (every and (n + 1) % every == 0) or self._stop or n + 1 == cfg.schedule.steps:
                    self._save(record, n + 1)
                if self._stop:
                    raise KeyboardInterrupt(f"{self._stop}: checkpoint written after step {n + 1}; rerun to resume")
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)
        return run_summary(record.metrics(), time.time() - t_run)

    def _step(self, n: int, examples: list[Any], record: Any) -> None:
        t0 = time.time()
        s = self.cfg.sampling
        rng = random.Random(stream_seed(SAMPLING, self.cfg.seed, n))  # the same draws when resumed
        probs = torch.softmax(self.logits, 0)
        rollouts = []  # (group, example, candidate index, verdicts)
        for g in range(s.prompts_per_step):
            example = examples[(n * s.prompts_per_step + g) % len(examples)]
            for c in rng.choices(range(len(self.responses)), weights=probs.tolist(), k=s.group_size):
                rollouts.append((g, example, c, self.task.score(example, self.responses[c])))
        K = max(len(v) for *_, v in rollouts)
        T = max(len(self.responses[c].split()) or 1 for _, _, c, _ in rollouts)
        rewards = torch.full((len(rollouts), K), float("nan"))
        mask = torch.zeros(len(rollouts), T, dtype=torch.bool)
        for j, (_, _, c, verdicts) in enumerate(rollouts):
            rewards[j, :len(verdicts)] = torch.tensor([v.value for v in verdicts])
            mask[j, :len(self.responses[c].split()) or 1] = True
        batch = RolloutBatch(rewards, torch.tensor([g for g, *_ in rollouts]), mask, step=n)
        adv, algo_metrics = self.algorithm.advantages(batch)
        per_response = (adv * mask).sum(1) / mask.sum(1)
        chosen = torch.tensor([c for _, _, c, _ in rollouts])
        grad = (torch.nn.functional.one_hot(chosen, len(self.responses)) - probs) * per_response.unsqueeze(1)
        self.logits += self.options["lr"] * grad.mean(0)

        row: dict[str, Any] = {"step": n + 1}
        for name in sorted({self.task.reward_family(v.reward) for *_, vs in rollouts for v in vs}):
            values = [v.value for *_, vs in rollouts for v in vs
                      if self.task.reward_family(v.reward) == name and not math.isnan(v.value)]
            row[f"reward/{name}"] = sum(values) / len(values) if values else None
        valid = rewards[~torch.isnan(rewards)]
        row["reward_mean"] = float(valid.mean()) if valid.numel() else float("nan")
        row["adv_abs_mean"] = float(adv[mask].abs().mean())
        row.update({f"algo/{k}": v for k, v in algo_metrics.items()})
        row["time_step"] = time.time() - t0
        record.append_metrics(row)
        record.append_samples({"step": n + 1, "example": ex.id, "group": g, "response": self.responses[c],
                               "rewards": {v.reward: None if math.isnan(v.value) else v.value for v in vs}}
                              for g, ex, c, vs in rollouts[:self.cfg.schedule.log_samples])

    # -- checkpoints and signals ---------------------------------------------------------------
    def _save(self, record: Any, step: int) -> None:
        atomic_write_json(record.checkpoint_dir / STATE_FILE, {"step": step, "logits": self.logits.tolist()})

    def _resume(self, record: Any) -> int:
        path = record.checkpoint_dir / STATE_FILE
        if not path.exists():
            return 0
        state = json.loads(path.read_text())
        self.logits = torch.tensor(state["logits"])
        return int(state["step"])

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stop = signal.Signals(signum).name
