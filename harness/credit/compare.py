"""``mrbench localize --algo A B ...``: several algorithms' token credit on one shared batch.

The batch is sampled once (groups of ``--group-size`` responses per prompt, seeded), scored once,
and each statistic an algorithm asks for (its replay kind) is made once and shared: the leave-one-out
relevance, the read-span masks, the entropy from the sampling pass, the token ids. Every algorithm
then computes its advantages on that batch as training would, at full strength (the batch's step is
:data:`FULL_STRENGTH_STEP`, past every built-in warm-up), and its per-reward credit goes into the
credit-quality table (:mod:`harness.credit.quality`): where it lands against the tokens each
reward's verifier read. OPSD is refused: its signal is a distillation loss, not token advantages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from harness.replay_builders import ReplayResult, read_span_mask, replay_for
from harness.token_align import align, touched
from mrbench_core.replay_kinds import WITHOUT_FORWARD, ReplayRequest

#: the step the algorithms see: past every built-in warm-up (MRTPO's 10 steps, CoRT's ramp)
FULL_STRENGTH_STEP = 1000


class CompareError(ValueError):
    """An algorithm the comparison cannot run (the message is one line)."""


def resolve_algorithms(names: Sequence[str], task: Any, task_name: str) -> list[Any]:
    """The algorithms, built with their defaults; refused in one line: an unknown name (listing the
    known ones), a repeated one, OPSD's teacher, a replay the task cannot build."""
    from algorithms.catalog import get_algorithm

    if len(set(names)) != len(names):
        raise CompareError(f"--algo names an algorithm twice: {' '.join(names)}")
    out = []
    for name in names:
        algo = get_algorithm(name)
        kind = ReplayRequest(algo.replay_request)
        if kind is ReplayRequest.TEACHER or algo.has_loss:
            raise CompareError(f"--algo {name}: its signal is a loss of its own (a teacher's distillation), not "
                               f"token advantages; leave it out")
        if kind not in task.supported_replays():
            raise CompareError(f"--algo {name}: task {task_name!r} cannot build its {kind.value} replay")
        out.append(algo)
    return out


def supply(kinds: set[ReplayRequest], engine: Any, task: Any, tokenizer: Any, rollouts: Sequence[Any],
           rewards: torch.Tensor, group_ids: torch.Tensor, T: int) -> dict[ReplayRequest, ReplayResult]:
    """Each requested statistic, made once (the step's builders; an engine only for those that need
    a forward pass)."""
    out = {}
    with torch.no_grad():
        for kind in sorted(kinds, key=lambda k: k.value):
            if kind is ReplayRequest.NONE:
                out[kind] = ReplayResult.nothing_replayed(rewards)
            else:
                out[kind] = replay_for(kind, None if kind in WITHOUT_FORWARD else engine, task, tokenizer, rollouts,
                                       rewards, group_ids, T)
    return out


def read_instances(tokenizer: Any, rollouts: Sequence[Any], rewards: torch.Tensor, group_ids: torch.Tensor,
                   T: int) -> tuple[np.ndarray, np.ndarray]:
    """(read[B,K,T] bool, instances[B,K] bool): the tokens each verifier read, and the pairs whose
    reward varies in its group and whose verifier read part of the response (the read-span masks of
    ``mrtpo-oracle``, :func:`harness.replay_builders.read_span_mask`)."""
    from algorithms.base import rewards_varying_in_group

    B, K = rewards.shape
    read = np.zeros((B, K, T), dtype=bool)
    instances = np.zeros((B, K), dtype=bool)
    varying = rewards_varying_in_group(rewards, group_ids)
    for j, r in enumerate(rollouts):
        if not r.response_ids or not any(v.spans for v in r.verdicts):
            continue
        alignment = align(tokenizer, r.response_ids, r.text)
        for k, verdict in enumerate(r.verdicts[:K]):
            if verdict.spans and read_span_mask(alignment, verdict.spans, T) is not None:
                flags = touched(alignment, verdict.spans)
                read[j, k, :len(flags)] = flags
                instances[j, k] = bool(varying[j, k])
    return read, instances


def credit_of(algo: Any, batch: Any) -> np.ndarray:
    """|A_k,t| [B,K,T]: the algorithm's per-reward split of its token advantage, or, for one that does
    not split it by reward, the token advantage itself under every reward that applies."""
    from algorithms import Advantages

    result = Advantages.of(algo.advantages(batch))
    parts = algo.contributions(batch, result)
    if parts is not None:
        return parts.per_token.abs().to(torch.float32).numpy()
    present = ~torch.isnan(batch.rewards)
    tokens = result.tokens.abs().to(torch.float32)
    return (tokens.unsqueeze(1) * present.unsqueeze(-1)).numpy()


def compare(algorithms: Sequence[Any], engine: Any, task: Any, tokenizer: Any, rollouts: Sequence[Any]
            ) -> dict[str, Any]:
    """The credit-quality table (:func:`harness.credit.quality.credit_quality`) of ``algorithms`` on
    the scored ``rollouts`` (groups by ``Rollout.group``)."""
    from harness.credit.quality import credit_quality
    from harness.training.batch import batch_tensors, reward_lows
    from harness.training.step_diagnostics import column_names

    rewards, group_ids, mask, T = batch_tensors(rollouts)
    stats = supply({ReplayRequest(a.replay_request) for a in algorithms}, engine, task, tokenizer, rollouts,
                   rewards, group_ids, T)
    for r in rollouts:
        r.hidden = r.logits = None
    lows = reward_lows(rollouts, task, rewards.shape[1])
    credit = {}
    for algo in algorithms:
        rep = stats[ReplayRequest(algo.replay_request)]
        batch = rep.to_batch(rewards, group_ids, mask, FULL_STRENGTH_STEP, lows, reward_names=column_names(rollouts))
        credit[algo.name] = credit_of(algo, batch)
    read, instances = read_instances(tokenizer, rollouts, rewards, group_ids, T)
    families = [[task.reward_family(n) for n in r.example.reward_names] + [""] * (rewards.shape[1] -
                len(r.example.reward_names)) for r in rollouts]
    lengths = [len(r.response_ids) for r in rollouts]
    result = credit_quality(credit, read, instances, families, lengths)
    result["counts"] = {"responses": len(rollouts), "groups": len({r.group for r in rollouts}),
                        "pairs": int((~torch.isnan(rewards)).sum()),
                        "varying_pairs": int(_varying(rewards, group_ids).sum())}
    return result


def _varying(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    from algorithms.base import rewards_varying_in_group

    return rewards_varying_in_group(rewards, group_ids)


def sampled_groups(model: Any, tokenizer: Any, eos: Sequence[int], examples: Sequence[Any], group_size: int,
                   sampling: Any, keep_entropy: bool, chunk: int = 8) -> list[Any]:
    """``group_size`` sampled responses per example, group g for ``examples[g]``; the sampling pass's
    hidden states are kept for the replay's P_all, and its entropy where ``keep_entropy``."""
    from tqdm.auto import tqdm

    from harness.backends.rollout import rollouts_for

    out: list[Any] = []
    with tqdm(total=len(examples) * group_size, desc="sampling", unit="response", dynamic_ncols=True) as bar:
        for start in range(0, len(examples), chunk):
            part = rollouts_for(model, tokenizer, examples[start:start + chunk], group_size, eos, sampling,
                                keep_hidden=True, keep_entropy=keep_entropy)
            for r in part:
                r.group += start
            out += part
            bar.update(len(part))
    return out


def run_methods(opts: Any, algorithms: Sequence[Any], task: Any, loaded: Any, attention: str, eos: Sequence[int],
                out: Any) -> dict[str, Any]:
    """The ``--algo`` branch of :func:`harness.credit.localize.run_localize`: sample, score, compare,
    write ``credit_quality.md``, ``.csv``, ``.json``, ``.png`` and ``responses.jsonl``; the result
    with ``settings`` (and each phase's seconds and the load average at the start and the end)."""
    import json
    import os
    import time
    from dataclasses import asdict

    from harness.config import SamplingConfig
    from harness.credit.quality import csv_text, figure, markdown
    from harness.credit.replayed import replay_engine, score
    from harness.training.batch import fit_prompts
    from mrbench_core.jsonio import atomic_write_json, atomic_write_text
    from tasks.data_source import load_examples

    load_start = os.getloadavg()
    t0 = time.perf_counter()
    model, tok = loaded.model, loaded.tokenizer
    prompts = opts.n // opts.group_size
    sampling = SamplingConfig(prompts_per_step=1, group_size=opts.group_size, temperature=opts.temperature,
                              max_new_tokens=opts.max_new_tokens)
    examples = load_examples(task, opts.split, opts.data_dir, prompts, opts.seed)
    examples, _ = fit_prompts(examples, tok, sampling.max_prompt_tokens)
    if not examples:
        raise ValueError(f"task {opts.task!r} gave no {opts.split!r} prompts to sample from")
    keep_entropy = any(ReplayRequest(a.replay_request) is ReplayRequest.ENTROPY for a in algorithms)
    rollouts = sampled_groups(model, tok, eos, examples[:prompts], opts.group_size, sampling, keep_entropy)
    t1 = time.perf_counter()
    score(task, rollouts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    result = compare(algorithms, replay_engine(model, pad, opts.temperature), task, tok, rollouts)
    t2 = time.perf_counter()
    result["settings"] = {**asdict(opts), "model_source": loaded.source, "rollout_dtype": str(model.dtype),
                          "attention": attention, "step": FULL_STRENGTH_STEP,
                          "seconds": {"sampling": round(t1 - t0, 1), "scoring_and_credit": round(t2 - t1, 1)},
                          "load_average": {"start": [round(x, 2) for x in load_start],
                                           "end": [round(x, 2) for x in os.getloadavg()]}}
    heading = (f"Model `{opts.model}` ({result['settings']['rollout_dtype']}, {attention} attention), task "
               f"`{opts.task}`, {len(rollouts)} sampled responses in {len(rollouts) // opts.group_size} groups of "
               f"{opts.group_size} (temperature {opts.temperature:g}, at most {opts.max_new_tokens} tokens), seed "
               f"{opts.seed}; each algorithm with its defaults at step {FULL_STRENGTH_STEP} (past every warm-up).")

    def line(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"

    atomic_write_text(out / "responses.jsonl", "".join(line({"example": r.example.to_json(), "group": r.group,
                                                             "response": r.text}) for r in rollouts))
    atomic_write_text(out / "credit_quality.md", markdown(result, heading))
    atomic_write_text(out / "credit_quality.csv", csv_text(result))
    atomic_write_json(out / "credit_quality.json", result)
    figure(result, out / "credit_quality.png", f"{opts.task}, {opts.model}: token credit on the tokens the "
                                               f"verifiers read")
    return result
