"""Responses outside training, sampled or given, scored and replayed by a model for credit rows.

Given responses come from a JSONL file whose rows hold ``response`` plus either ``example`` (an
example as :meth:`tasks.base.Example.to_json` writes it, as ``mrbench localize`` saves its
responses) or the task's own example fields (as for ``mrbench score``). A given response is
tokenized by the model's tokenizer and ended with its end-of-turn token, as a sampled response
is; the verifiers read the text decoded from those tokens.

Every (response, reward) pair whose reward applies and whose task builds a leave-one-out context
is replayed (paper Eq. 4-5), whether or not the reward varies in a group. A row's ``w`` is Eq. 6
at MRTPO's default beta on the response's own relevance; given and sampled responses have no
advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from algorithms.mrtpo import MRTPOConfig, relevance_weights
from harness.backends.rollout import rollouts_for
from harness.models import chat_prompt_ids
from harness.replay import ReplayEngine
from harness.replay_builders import leave_one_out
from harness.token_align import align
from harness.training.batch import Rollout, batch_tensors, decode_response
from harness.training.credit_rows import credit_row, prompt_text
from mrbench_core.errors import DataError
from mrbench_core.jsonio import iter_jsonl
from tasks.base import Example

#: responses replayed together (one engine wave each; also the progress bar's unit)
REPLAY_CHUNK = 4


def example_from_json(data: Any, where: str) -> Example:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list) \
            or not isinstance(data.get("reward_names"), list):
        raise DataError("'example' must be an object with 'id', 'messages' and 'reward_names' (and 'meta')",
                        path=where)
    return Example(id=str(data.get("id", "")), messages=data["messages"], reward_names=list(data["reward_names"]),
                   meta=dict(data.get("meta") or {}))


def load_given(task: Any, path: str, data_dir: str | None = None, limit: int | None = None
               ) -> list[tuple[Example, str]]:
    """(example, response text) for the rows of ``path`` (see the module docstring)."""
    out = []
    for lineno, row in iter_jsonl(path):
        where = f"{path}, row {lineno}"
        response = row.get("response")
        if not isinstance(response, str):
            raise DataError("row needs a string 'response'", path=path, row=lineno)
        if "example" in row:
            example = example_from_json(row["example"], where)
        else:
            example = task.example_from_row(row, where=where, data_dir=data_dir)
        out.append((example, response))
        if limit is not None and len(out) >= limit:
            break
    if not out:
        raise DataError("no rows", path=path)
    return out


def given_rollouts(tokenizer: Any, eos: Sequence[int], given: Sequence[tuple[Example, str]]) -> list[Rollout]:
    """One rollout (its own group) per given response."""
    out = []
    for j, (example, text) in enumerate(given):
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"]) + [int(eos[0])]
        out.append(Rollout(example, j, chat_prompt_ids(tokenizer, example.messages), ids,
                           decode_response(tokenizer, ids), truncated=False))
    return out


def sampled_rollouts(model: Any, tokenizer: Any, eos: Sequence[int], examples: Sequence[Example], sampling: Any,
                     chunk: int = 8) -> list[Rollout]:
    """One sampled response per example (``sampling``: a :class:`harness.config.SamplingConfig`),
    each its own group; the sampling pass's hidden states are kept for the replay's P_all."""
    from tqdm.auto import tqdm

    out: list[Rollout] = []
    with tqdm(total=len(examples), desc="sampling", unit="response", dynamic_ncols=True) as bar:
        for start in range(0, len(examples), chunk):
            part = rollouts_for(model, tokenizer, examples[start:start + chunk], 1, eos, sampling,
                                keep_hidden=True)
            for r in part:
                r.group = len(out)
                out.append(r)
            bar.update(len(part))
    return out


def replay_engine(model: Any, pad_id: int, temperature: float) -> ReplayEngine:
    """A replay engine set as training sets it with the default ``replay`` section (batch and chunk
    sizes, prefix sharing) and ``backend.local`` options (replay batching and LM head), so the
    relevance is the one MRTPO would compute for these responses."""
    from harness.backends.local_engine import exact_replay_batches, replay_head_float32
    from harness.config import LocalBackendConfig, ReplayConfig

    opts = LocalBackendConfig()
    return ReplayEngine.from_config(model, ReplayConfig(), pad_id, temperature,
                                    head_float32=replay_head_float32(opts.replay_head, model.dtype),
                                    exact_batches=exact_replay_batches(opts.replay_batching))


def score(task: Any, rollouts: Sequence[Rollout]) -> None:
    for r in rollouts:
        r.verdicts = task.score(r.example, r.text)


def replay_all(engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Rollout]) -> torch.Tensor:
    """relevance[B, K, T] of every applicable (response, reward) pair (NaN where not replayed)."""
    from tqdm.auto import tqdm

    rewards, _, _, T = batch_tensors(rollouts)
    out = torch.full((len(rollouts), rewards.shape[1], T), float("nan"))
    with tqdm(total=len(rollouts), desc="replaying", unit="response", dynamic_ncols=True) as bar, torch.no_grad():
        for start in range(0, len(rollouts), REPLAY_CHUNK):
            part = list(rollouts[start:start + REPLAY_CHUNK])
            r_part, g_part, _, t_part = batch_tensors(part)
            res = leave_one_out(engine, task, tokenizer, part, r_part, g_part, t_part, pairs=~torch.isnan(r_part))
            out[start:start + len(part), :r_part.shape[1], :t_part] = res.relevance
            for r in part:
                r.hidden = r.logits = None
            bar.update(len(part))
    return out


def credit_rows(task: Any, tokenizer: Any, rollouts: Sequence[Rollout], relevance: torch.Tensor,
                beta: float = MRTPOConfig.beta) -> list[dict[str, Any]]:
    """Credit rows (no step, no advantage) of replayed rollouts."""
    rows = []
    prompted: set[int] = set()
    for j, r in enumerate(rollouts):
        prompt = None if r.group in prompted else prompt_text(r.example.messages)
        prompted.add(r.group)
        T, K = len(r.response_ids), len(r.verdicts)
        q = relevance[j, :K, :T]
        w, has = relevance_weights(q.unsqueeze(0), torch.ones(1, T, dtype=torch.bool), beta)
        qs = [q[k].tolist() if bool(torch.isfinite(q[k]).all()) else None for k in range(K)]
        ws = [w[0, k].tolist() if bool(has[0, k]) else None for k in range(K)]
        rows.append(credit_row(step=None, example=r.example.id, group=int(r.group), index=j,
                               alignment=align(tokenizer, r.response_ids, r.text), verdicts=r.verdicts, task=task,
                               q=qs, w=ws, prompt=prompt))
    return rows
