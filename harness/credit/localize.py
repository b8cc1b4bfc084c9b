"""``mrbench localize``: where each reward's replay distance falls, the paper's Table 4 and Figure 6.

Samples one response per prompt (or takes given responses), scores them, replays every
applicable reward with its leave-one-out context (:mod:`harness.credit.replayed`) and writes to
the output folder:

- ``table4.md``: Table 4 per reward type and verdict, the pooled satisfied and violated rows, the
  share of tokens holding 80% of each reward's distance, and the mean correlation between
  different rewards' distance profiles on the same response (:mod:`harness.credit.report`);
- ``table4.csv``: Table 4 in long form; ``localize.json``: every figure and the settings;
- ``concentration.png``: the concentration curves (:mod:`harness.credit.figure`);
- ``credit.jsonl``: the credit rows (``mrbench credit DIR --out PAGE.html`` shows them);
- ``responses.jsonl``: the responses with their examples (``--responses`` takes them back).

The "part its checker reads" is each verdict's character spans: the constraint checker's for
instruction following, the tags, executed statement or select lists and conditions (parsed by
sqlglot) for text-to-SQL, the tags or the call block for tool calling. Sampling and replay run as
in training: in the rollout dtype (``--dtype auto``: bf16 where native), with the default
``backend.local`` replay options (:func:`harness.credit.replayed.replay_engine`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from harness.credit.figure import concentration_figure
from harness.credit.replayed import (
    credit_rows,
    given_rollouts,
    load_given,
    replay_all,
    replay_engine,
    sampled_rollouts,
    score,
)
from harness.credit.report import analyse, csv_text, markdown
from mrbench_core.jsonio import atomic_write_json, atomic_write_text
from tasks.data_source import load_examples

#: responses per prompt with --algo (credit is relative within a group)
DEFAULT_GROUP_SIZE = 4


@dataclass
class LocalizeOptions:
    out: str
    model: str = "smollm2-135m"
    task: str = "ifollow"
    n: int = 32
    split: str = "train"
    data_dir: str | None = None
    responses: str | None = None
    max_new_tokens: int = 256
    temperature: float = 1.0
    dtype: str = "auto"
    device: str = "auto"
    threads: int = 0
    seed: int = 0
    algo: list[str] | None = None
    group_size: int | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"--n must be at least 1, got {self.n}")
        if self.algo is None:
            if self.group_size is not None:
                raise ValueError("--group-size samples groups for --algo's credit; give --algo too")
        else:
            if self.responses:
                raise ValueError("--algo compares credit within groups of sampled responses; --responses gives "
                                 "responses without groups: leave it out")
            if self.group_size is None:
                self.group_size = DEFAULT_GROUP_SIZE
            if self.group_size < 2:
                raise ValueError(f"--group-size must be at least 2 (credit is relative within a group), got "
                                 f"{self.group_size}")
            if self.n % self.group_size:
                raise ValueError(f"--n {self.n} is not a whole number of groups of --group-size {self.group_size}")
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"--temperature must be positive (responses are sampled), got {self.temperature}")


def run_localize(opts: LocalizeOptions) -> dict[str, Any]:
    """Run the analysis; the result of :func:`harness.credit.report.analyse` plus ``settings``."""
    from harness.attention import use_for_rollout
    from harness.config import SamplingConfig
    from harness.models import eos_ids, load_model
    from harness.system import thread_choice
    from tasks.registry import make_task

    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    threads, why = thread_choice(opts.threads)
    torch.set_num_threads(threads)
    print(f"mrbench localize: {threads} CPU thread(s): {why}")
    task = make_task(opts.task)
    algorithms = None
    if opts.algo is not None:
        from harness.credit.compare import resolve_algorithms

        algorithms = resolve_algorithms(opts.algo, task, opts.task)  # refused before any model loads
    loaded = load_model(opts.model, dtype=opts.dtype, device=opts.device)
    model, tok = loaded.model, loaded.tokenizer
    attention = use_for_rollout(model, "auto")
    task.use_tokenizer(tok)
    eos = eos_ids(tok, model)
    torch.manual_seed(opts.seed)
    if algorithms is not None:
        from harness.credit.compare import run_methods

        return run_methods(opts, algorithms, task, loaded, attention, eos, out)
    if opts.responses:
        rollouts = given_rollouts(tok, eos, load_given(task, opts.responses, opts.data_dir, limit=opts.n))
    else:
        from harness.training.batch import fit_prompts

        sampling = SamplingConfig(prompts_per_step=1, temperature=opts.temperature,
                                  max_new_tokens=opts.max_new_tokens)
        examples = load_examples(task, opts.split, opts.data_dir, opts.n, opts.seed)
        examples, _ = fit_prompts(examples, tok, sampling.max_prompt_tokens)
        if not examples:
            raise ValueError(f"task {opts.task!r} gave no {opts.split!r} prompts to sample from")
        rollouts = sampled_rollouts(model, tok, eos, examples[:opts.n], sampling)
    score(task, rollouts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    engine = replay_engine(model, pad, opts.temperature)
    relevance = replay_all(engine, task, tok, rollouts)
    rows = credit_rows(task, tok, rollouts, relevance)
    result = analyse(rows)
    result["settings"] = {**asdict(opts), "model_source": loaded.source, "rollout_dtype": str(model.dtype),
                          "attention": attention, "replay_batching": "exact" if engine.exact_batches else "padded",
                          "replay_head": "float32" if engine.head_float32 else "model",
                          "responses_scored": len(rollouts)}
    _write(out, opts, rows, rollouts, result)
    return result


def _write(out: Path, opts: LocalizeOptions, rows: list[dict[str, Any]], rollouts: list[Any],
           result: dict[str, Any]) -> None:
    def line(obj: Any) -> str:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"

    atomic_write_text(out / "credit.jsonl", "".join(line(r) for r in rows))
    atomic_write_text(out / "responses.jsonl",
                      "".join(line({"example": r.example.to_json(), "response": r.text}) for r in rollouts))
    s = result["settings"]
    source = f"given responses ({opts.responses})" if opts.responses else \
        f"{len(rollouts)} sampled responses (temperature {opts.temperature:g}, at most {opts.max_new_tokens} tokens)"
    heading = (f"Model `{opts.model}` ({s['rollout_dtype']}, {s['attention']} attention), task `{opts.task}`, "
               f"{source}, seed {opts.seed}.")
    atomic_write_text(out / "table4.md", markdown(result, heading))
    atomic_write_text(out / "table4.csv", csv_text(result))
    atomic_write_json(out / "localize.json", result)
    concentration_figure(result, out / "concentration.png", f"{opts.task}, {opts.model}: concentration of distance")
