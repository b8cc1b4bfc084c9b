"""Generating a benchmark's responses with a model: batched, with a progress bar, and costed first.

:func:`generate_for_cases` hands the model batches of :data:`EVAL_BATCH` cases of similar prompt
length (longest first, so the estimate on the bar errs long early on rather than short) and
advances a progress bar per case, with tqdm's rate and time left.

:func:`estimate` measures this machine before a benchmark starts: after one untimed token for
one case (which loads the model), it generates 1 token, then ``1 + PROBE_TOKENS`` tokens, for the
batch of the longest prompts, and takes the difference as the cost of one decoding step of a
batch. The estimate for the benchmark is then

    batches x (time of the 1-token pass + max_new_tokens x seconds per decoding step)

which assumes every response runs to ``max_new_tokens`` (generation stops earlier at the end of
turn, so it errs long), and ignores that later batches have shorter prompts. ``mrbench eval
--model`` refuses to start a benchmark whose estimate exceeds ``--max-minutes``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evals.base import EvalCase

#: (chat messages per case, max new tokens) -> texts, greedy (the harness builds one from a backend)
Generate = Callable[[list[list[dict[str, str]]], int], list[str]]

#: cases per call of ``generate`` (the local backend decodes them as one batch)
EVAL_BATCH = 8
#: decoding steps of the estimate's second probe, beyond the first token
PROBE_TOKENS = 8


def scorable(cases: Sequence[EvalCase]) -> list[EvalCase]:
    """The cases a model is asked about (one with ``meta['skip_reason']``, e.g. a question on a
    missing database, is reported as skipped without generating)."""
    return [c for c in cases if not c.meta.get("skip_reason")]


def _prompt_size(case: EvalCase) -> int:
    return sum(len(str(m.get("content", ""))) for m in case.messages)


def batches(cases: Sequence[EvalCase], size: int = EVAL_BATCH) -> list[list[EvalCase]]:
    """Cases in batches of similar prompt length, longest first."""
    ordered = sorted(cases, key=_prompt_size, reverse=True)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def generate_for_cases(generate: Generate, cases: Sequence[EvalCase], max_new_tokens: int, *,
                       desc: str | None = None, progress: bool = True) -> dict[str, str]:
    """Responses (case id -> text) for the cases that can be scored, batch by batch."""
    todo = scorable(cases)
    out: dict[str, str] = {}
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), desc=desc or "generating", unit="case", dynamic_ncols=True)
    try:
        for batch in batches(todo):
            texts = generate([c.messages for c in batch], max_new_tokens)
            out.update({c.id: t for c, t in zip(batch, texts)})
            if bar is not None:
                bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()
    return out


def decoding_info(generate: Generate) -> dict[str, Any]:
    """How ``generate`` decodes, where its backend says (``rollout_info()`` of the object a bound
    ``generate`` belongs to): precision, attention implementation, CPU threads. ``eval.json`` and
    ``summary.json`` keep it, so a number says what produced it."""
    owner = getattr(generate, "__self__", None)
    info = owner.rollout_info() if hasattr(owner, "rollout_info") else {}
    return {k: info[k] for k in ("dtype", "attention", "threads") if info.get(k) is not None}


@dataclass
class Estimate:
    """The expected generation time of one benchmark on this machine (module docstring)."""

    name: str
    cases: int
    max_new_tokens: int
    first_token_s: float
    step_s: float

    @property
    def seconds(self) -> float:
        return math.ceil(self.cases / EVAL_BATCH) * (self.first_token_s + self.max_new_tokens * self.step_s)

    def describe(self) -> str:
        return (f"{self.name}: {self.cases} cases of up to {self.max_new_tokens} tokens, about "
                f"{duration(self.seconds)} on this machine (measured {self.step_s:.3g} s per decoding step of a "
                f"batch of {EVAL_BATCH}, {self.first_token_s:.3g} s for its prompts)")


def duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.0f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def estimate(name: str, generate: Generate, cases: Sequence[EvalCase], max_new_tokens: int,
             generate_cases: Any = None) -> Estimate:
    """Probe the batch of the longest prompts (module docstring). ``generate_cases`` is the batched
    generator to time (default :func:`generate_for_cases`)."""
    run = generate_cases or generate_for_cases
    todo = scorable(cases)
    if not todo:
        return Estimate(name, 0, max_new_tokens, 0.0, 0.0)
    probe = batches(todo)[0]
    run(generate, probe[:1], 1, progress=False)  # untimed: loads the model (a backend loads it on first use)
    t0 = time.perf_counter()
    run(generate, probe, 1, progress=False)
    t1 = time.perf_counter()
    run(generate, probe, 1 + PROBE_TOKENS, progress=False)
    t2 = time.perf_counter()
    first, longer = t1 - t0, t2 - t1
    step = (longer - first) / PROBE_TOKENS
    if step <= 0:  # timer noise on a busy machine: charge the whole second probe per step
        step = longer / (1 + PROBE_TOKENS)
    return Estimate(name, len(todo), max_new_tokens, first, step)
