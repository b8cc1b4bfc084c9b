"""Fitting a generated evaluation to the machine before it starts: memory, then time.

An end-of-run evaluation (``mrbench run``'s ``eval.json``) may meet a benchmark far larger than
the machine: the tool-calling recipe's 3,625 BFCL cases, whose tool lists make prompts of tens of
thousands of tokens under a byte tokenizer. Before anything is generated:

1. **Memory.** A backend that can say what one case costs (``generation_bytes(messages,
   max_new_tokens, batch)`` on the object a bound ``generate`` belongs to: the attention scores
   of the prompt's prefill and the key/value cache, for a batch of :data:`EVAL_BATCH` such cases)
   has every case whose cost exceeds :func:`memory_budget` (half the memory available now) left
   out. One warning says how many, and the longest prompt kept.
2. **Time.** The rest is costed on this machine (:func:`evals.generate_cases.estimate`, the
   probes ``mrbench eval`` uses). Above ``max_minutes`` the benchmark keeps the first cases that
   fit, whole batches, at least one, with one warning naming the estimate and how many were kept.

What was left out is returned as notes, which ``eval.json`` keeps beside the figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evals.base import EvalCase
from evals.generate_cases import EVAL_BATCH, Estimate, Generate, estimate, scorable

#: share of the available memory one generation batch may take
MEMORY_SHARE = 0.5
#: used where the available memory cannot be read
FALLBACK_BYTES = 8 << 30


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable`` of /proc/meminfo), else :data:`FALLBACK_BYTES`."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return FALLBACK_BYTES


def memory_budget() -> int:
    return int(MEMORY_SHARE * available_memory())


def gib(n: float) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def fit_memory(name: str, generate: Generate, cases: Sequence[EvalCase], max_new_tokens: int,
               budget: int | None = None) -> tuple[list[EvalCase], list[str]]:
    """(the cases whose generation fits in ``budget`` bytes, warnings); every case when the backend
    cannot say what a case costs."""
    owner = getattr(generate, "__self__", None)
    cost = getattr(owner, "generation_bytes", None)
    if cost is None:
        return list(cases), []
    if budget is None:
        device_free = getattr(owner, "memory_available", lambda: None)()
        budget = int(MEMORY_SHARE * device_free) if device_free is not None else memory_budget()
    kept, dropped, worst = [], 0, 0
    for case in cases:
        if case.meta.get("skip_reason"):
            kept.append(case)
            continue
        need = int(cost(case.messages, max_new_tokens, EVAL_BATCH))
        if need > budget:
            dropped += 1
            worst = max(worst, need)
        else:
            kept.append(case)
    if not dropped:
        return kept, []
    return kept, [f"{name}: left out {dropped} of {len(cases)} cases whose prompts are too long for this machine's "
                  f"memory (a batch of {EVAL_BATCH} of the longest would need {gib(worst)}; the budget is "
                  f"{gib(budget)}, half the memory available now); the figures are over the other {len(kept)}"]


def fit_time(name: str, generate: Generate, cases: Sequence[EvalCase], max_new_tokens: int,
             max_minutes: float | None, probe: Any = None) -> tuple[list[EvalCase], Estimate | None, list[str]]:
    """(the first cases that fit in ``max_minutes`` on this machine, the estimate, warnings);
    ``probe``: the estimator (default :func:`evals.generate_cases.estimate`)."""
    if not max_minutes or not scorable(cases):
        return list(cases), None, []
    found = (probe or estimate)(name, generate, cases, max_new_tokens)
    if found.seconds <= max_minutes * 60:
        return list(cases), found, []
    per_batch = found.seconds / max(1, math.ceil(found.cases / EVAL_BATCH))
    batches = max(1, int(max_minutes * 60 // per_batch))
    todo = scorable(cases)
    keep_ids = {c.id for c in todo[:batches * EVAL_BATCH]}
    kept = [c for c in cases if c.id in keep_ids or c.meta.get("skip_reason")]
    return kept, found, [f"{name}: {found.describe()}: more than schedule.eval_max_minutes {max_minutes:g}, so only "
                         f"the first {len(keep_ids)} of {len(todo)} cases are evaluated (set "
                         f"--schedule.eval_limit, --schedule.eval_max_new_tokens or --schedule.eval_max_minutes)"]


def fit_cases(name: str, generate: Generate, cases: Sequence[EvalCase], max_new_tokens: int,
              max_minutes: float | None) -> tuple[list[EvalCase], list[str]]:
    """Memory first (so that no probe meets a prompt that cannot fit), then time (module docstring)."""
    kept, notes = fit_memory(name, generate, cases, max_new_tokens)
    kept, _, more = fit_time(name, generate, kept, max_new_tokens, max_minutes)
    return kept, notes + more
