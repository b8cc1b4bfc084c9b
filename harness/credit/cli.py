"""The ``mrbench credit`` and ``mrbench localize`` commands.

    mrbench credit RECORD [--step N] --out PAGE.html
    mrbench credit --model M --task T --data rows.jsonl [--data-dir DIR] --out PAGE.html
    mrbench localize [--model smollm2-135m] [--task ifollow] [--n 32] [--responses FILE] --out DIR
    mrbench localize --algo gdpo mrtpo mrtpo-oracle ... [--n 32] [--group-size 4] --out DIR
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parsers(sub: Any) -> None:
    cr = sub.add_parser("credit", help="a self-contained HTML page of per-token credit (from a record, or replayed)",
                        description="Write one HTML page showing each response's tokens coloured by the relevance "
                                    "of a chosen reward, the tokens its checker read and the final advantage. "
                                    "From a run record's credit.jsonl (RECORD), or from responses in a file "
                                    "replayed by a model (--model, --task, --data).")
    cr.add_argument("record", nargs="?", help="run record folder (or any folder holding credit.jsonl)")
    cr.add_argument("--step", type=int, help="the training step to show (default: the last one logged)")
    cr.add_argument("--model", help="replay the responses of --data with this model")
    cr.add_argument("--task", help="the task whose verifiers score the responses of --data")
    cr.add_argument("--data", help="JSONL rows with 'response' and the task's example fields (or 'example')")
    cr.add_argument("--data-dir", help="dataset root the rows refer to (e.g. Spider's databases)")
    cr.add_argument("--limit", type=int, help="only the first N rows of --data")
    cr.add_argument("--dtype", default="auto", help="replay dtype (default auto: as the training rollouts)")
    cr.add_argument("--device", default="auto", help="auto (a GPU when present), cpu, cuda, cuda:N")
    cr.add_argument("--temperature", type=float, default=1.0, help="the temperature the responses were sampled at")
    cr.add_argument("--out", required=True, help="the HTML page to write")

    lo = sub.add_parser("localize", help="where each reward's replay distance falls (paper Table 4, Figure 6), or "
                                         "each algorithm's token credit (--algo)",
                        description="Sample (or take) responses, replay each reward with its leave-one-out "
                                    "context, and write Table 4, concentration and correlation figures as "
                                    "Markdown, CSV, JSON and a PNG figure into --out. With --algo, sample groups "
                                    "once and write where each algorithm's token credit lands against the tokens "
                                    "each reward's verifier read (the credit-quality table).")
    lo.add_argument("--model", default="smollm2-135m", help="the model that samples and replays (mrbench list; "
                    "default smollm2-135m)")
    lo.add_argument("--task", default="ifollow", help="the task whose prompts and verifiers are used (default ifollow)")
    lo.add_argument("--n", type=int, default=32, help="responses (one per prompt)")
    lo.add_argument("--split", default="train", help="the task's data split to draw prompts from (default train)")
    lo.add_argument("--data-dir", help="the task's data (default: its built-in data, where it has any)")
    lo.add_argument("--responses", help="take these responses (JSONL, as for credit --data) instead of sampling")
    lo.add_argument("--max-new-tokens", type=int, default=256, help="longest sampled response, in tokens")
    lo.add_argument("--temperature", type=float, default=1.0, help="sampling and replay temperature (default 1.0)")
    lo.add_argument("--dtype", default="auto", help="sampling and replay dtype (auto: as in training, bf16 where "
                                                    "native)")
    lo.add_argument("--device", default="auto", help="auto (a GPU when present), cpu, cuda, cuda:N")
    lo.add_argument("--threads", type=int, default=0, help="CPU threads (0: auto)")
    lo.add_argument("--seed", type=int, default=0, help="seed of the prompt draw and the sampling (default 0)")
    lo.add_argument("--algo", nargs="+", metavar="A",
                    help="compare these algorithms' token credit on one shared batch (groups of sampled responses): "
                         "the credit-quality table, credit_quality.md/.csv/.json/.png")
    lo.add_argument("--group-size", type=int, help="responses per prompt with --algo (default 4; --n counts "
                                                   "responses)")
    lo.add_argument("--out", required=True, help="output folder")


def cmd_credit(args: argparse.Namespace) -> int:
    from harness.credit.page import write_page

    replay = [args.model, args.task, args.data]
    if args.record is not None and any(v is not None for v in replay):
        print("mrbench credit: give either RECORD or --model, --task and --data, not both", file=sys.stderr)
        return 2
    if args.record is None:
        if any(v is None for v in replay):
            print("mrbench credit: give RECORD, or all of --model, --task and --data", file=sys.stderr)
            return 2
        rows = _replayed_rows(args)
        title, sub = f"Per-token credit: {args.task}, {args.model}", f"responses replayed from {args.data}"
    else:
        rows, step = _record_rows(args.record, args.step)
        title = f"Per-token credit: {args.record}"
        sub = f"training step {step}" if step is not None else "responses replayed outside training"
    path = write_page(rows, args.out, title, sub)
    print(f"{len(rows)} responses -> {path}")
    return 0


def _record_rows(record: str, step: int | None) -> tuple[list[dict[str, Any]], int | None]:
    from harness.training.credit_store import logged_steps, read_rows

    steps = logged_steps(record)
    if step is None:
        step = steps[-1] if steps else None
    elif step not in steps:
        raise ValueError(f"{record}: no credit rows for step {step}; logged steps: "
                         f"{', '.join(map(str, steps)) or 'none'}")
    rows = read_rows(record, step)
    if not rows:
        raise ValueError(f"{record}: credit.jsonl holds no rows")
    return rows, step


def _replayed_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    from harness.credit.replayed import credit_rows, given_rollouts, load_given, replay_all, replay_engine, score
    from harness.models import eos_ids, load_model
    from tasks.registry import make_task

    task = make_task(args.task)
    loaded = load_model(args.model, dtype=args.dtype, device=args.device)
    tok = loaded.tokenizer
    task.use_tokenizer(tok)
    eos = eos_ids(tok, loaded.model)
    rollouts = given_rollouts(tok, eos, load_given(task, args.data, args.data_dir, limit=args.limit))
    score(task, rollouts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else eos[0]
    engine = replay_engine(loaded.model, pad, args.temperature)
    return credit_rows(task, tok, rollouts, replay_all(engine, task, tok, rollouts))


def cmd_localize(args: argparse.Namespace) -> int:
    from harness.credit.localize import LocalizeOptions, run_localize

    opts = LocalizeOptions(out=args.out, model=args.model, task=args.task, n=args.n, split=args.split,
                           data_dir=args.data_dir, responses=args.responses, max_new_tokens=args.max_new_tokens,
                           temperature=args.temperature, dtype=args.dtype, device=args.device, threads=args.threads,
                           seed=args.seed, algo=args.algo, group_size=args.group_size)
    result = run_localize(opts)
    if opts.algo is not None:
        for name, s in result["pooled"].items():
            conc = "-" if s["concentration"] is None else f"{s['concentration']:.2f}x uniform"
            print(f"{name}: credit on the tokens the verifiers read {conc} (n={s['n']})")
        print(f"table -> {args.out}/credit_quality.md, figure -> {args.out}/credit_quality.png")
        return 0
    pooled = result["pooled"]

    def ratio(status: str) -> str:
        s = pooled[status]
        return f"{s['ratio']:.2f} (n={s['n']})" if s["ratio"] is not None else f"- (n={s['n']})"

    print(f"pooled ratio: satisfied {ratio('satisfied')}, violated {ratio('violated')}")
    print(f"table -> {args.out}/table4.md, figure -> {args.out}/concentration.png")
    return 0
