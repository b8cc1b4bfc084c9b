"""The ``example-canned`` backend: no language model, only an engine for mrbench's shared step.

Its policy is a softmax over a fixed list of candidate responses, one logit each. The training
step is mrbench's own (:class:`harness.training.step.Step`: the prompts, the verifiers under their time
budget, the algorithm's advantages, the metrics row with its per-reward diagnostics, the sample
rows); this backend supplies the engine operations the step asks for:

- ``sample``: ``group_size`` candidates per prompt, drawn from the softmax with the step's seed
  (a token is a whitespace-separated word, :class:`WordTokenizer`);
- ``update``: one policy-gradient step on the logits with each response's mean token advantage;
- ``sync``: nothing (the sampler is the policy);
- ``save`` / ``load``: the logits, the step counter and the data position, in ``canned.json``.

Its ``train`` is mrbench's prologue (:meth:`harness.training.step.Step.open`: the data loaded and
checked, the record started, the relevance guard, and the credit log, which writes
``credit.jsonl`` word by word with the word tokenizer), then mrbench's run loop
(:class:`harness.training.run_loop.RunLoop`), which resumes from ``load``, checkpoints with
``save`` every ``checkpoint_every`` steps and at the end, on SIGTERM/SIGINT checkpoints and raises
``TrainingInterrupted``, and warns (or, with ``schedule.stop_without_signal``, stops) when no
reward varies in any group. ``generate`` returns the most likely candidate.

Options, under ``backend.options.example-canned``: ``responses`` (the candidates) and ``lr``.
It runs no replay, so only algorithms whose replay kind is ``none`` fit (pre-flight refuses
the others before the run starts).
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import torch

from harness.backends.base import Backend
from harness.backends.honours import LOOP_FIELDS, STEP_FIELDS
from harness.training.batch import Rollout
from harness.training.run_loop import RunLoop
from harness.training.step import Step
from harness.training.step_metrics import UpdateStats
from mrbench_core.jsonio import atomic_write_json
from mrbench_core.replay_kinds import ReplayRequest

DEFAULTS = {"responses": ["OK.", "I cannot help with that.", "Here is a long and careful answer to your request."],
            "lr": 0.5}
STATE_FILE = "canned.json"


class CannedBackend(Backend):
    """Model-free backend: a softmax policy over canned responses, trained by policy gradient."""

    name = "example-canned"
    supported_replays = frozenset({ReplayRequest.NONE})
    #: what mrbench's step and run loop read, and its engine's own; pre-flight refuses any other setting given
    honours = STEP_FIELDS | LOOP_FIELDS | frozenset({"sampling.group_size", "backend.options.example-canned"})

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
        self.tokenizer = WordTokenizer(self.responses)

    def generate(self, messages_list: list[list[dict[str, str]]], max_new_tokens: int) -> list[str]:
        best = self.responses[int(self.logits.argmax())]
        return [" ".join(best.split()[:max_new_tokens]) for _ in messages_list]

    # -- training: mrbench's step and run loop on this engine --------------------------------------
    def train(self, record: Any) -> dict[str, Any]:
        started = time.time()
        step, examples = Step.open(self.cfg, self.task, self.algorithm, record, self.tokenizer,
                                   extra={"backend": self.name, "candidates": len(self.responses)})
        loop = RunLoop(step, self, record, started)
        loop.run(examples)  # resume (load), then step after step on this engine, checkpointing (save)
        return loop.summary()

    # -- engine operations (harness.training.engine.Engine) ------------------------------------------
    def sample(self, examples: list[Any], plan: Any, seed: int) -> list[Rollout]:
        rng = random.Random(seed)  # the step's seed: the same draws when resumed
        weights = torch.softmax(self.logits, 0).tolist()
        out = []
        for g, example in enumerate(examples):
            for c in rng.choices(range(len(self.responses)), weights=weights, k=self.cfg.sampling.group_size):
                text = self.responses[c]
                words = self.tokenizer.encode(text) or [WordTokenizer.END]  # an empty response has one token
                out.append(Rollout(example, g, prompt_ids=[], response_ids=words, text=text, truncated=False))
        return out

    def update(self, rollouts: list[Rollout], adv: torch.Tensor, T: int, algorithm: Any,
               teacher_hidden: Any = None) -> UpdateStats:
        mask = torch.zeros(len(rollouts), T, dtype=torch.bool)
        for j, r in enumerate(rollouts):
            mask[j, :len(r.response_ids)] = True
        per_response = (adv * mask).sum(1) / mask.sum(1)
        chosen = torch.tensor([self.responses.index(r.text) for r in rollouts])
        probs = torch.softmax(self.logits, 0)
        grad = (torch.nn.functional.one_hot(chosen, len(self.responses)) - probs) * per_response.unsqueeze(1)
        self.logits += self.options["lr"] * grad.mean(0)
        return UpdateStats(loss=-float((per_response * probs[chosen].log()).mean()), tokens=int(mask.sum()))

    def replay(self, *args: Any) -> Any:
        raise NotImplementedError("example-canned runs no replay (supported_replays: none)")

    def sync(self) -> None:
        """The sampler is the policy: nothing to copy."""

    def save(self, record: Any, step: int, position: int) -> None:
        atomic_write_json(record.checkpoint_dir / STATE_FILE,
                          {"step": step, "position": position, "logits": self.logits.tolist()})

    def load(self, record: Any) -> tuple[int, int] | None:
        path = record.checkpoint_dir / STATE_FILE
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        self.logits = torch.tensor(state["logits"])
        return int(state["step"]), int(state["position"])


class WordTokenizer:
    """Words as tokens, enough for mrbench's step: ``encode`` gives each new word the next id,
    ``decode`` joins words with single spaces (id 0, ``END``, ends a response and decodes to
    nothing); a chat prompt is its messages' words (prompt lengths in words)."""

    END = 0

    def __init__(self, texts: list[str]):
        self.words = [""]
        self.ids: dict[str, int] = {}
        self.all_special_ids = [self.END]
        for text in texts:  # the candidates' words first: their ids are the same in every run
            self.encode(text)

    def encode(self, text: str) -> list[int]:
        for word in text.split():
            self.ids.setdefault(word, len(self.ids) + 1)
            if len(self.words) <= self.ids[word]:
                self.words.append(word)
        return [self.ids[word] for word in text.split()]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(self.words[i] for i in ids if i != self.END or not skip_special_tokens)

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = True,
                            add_generation_prompt: bool = True) -> list[int]:
        return self.encode(" ".join(str(m.get("content", "")) for m in messages))
