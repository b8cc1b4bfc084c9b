"""``mrbench eval NAME ... (--predictions FILE | --model M)``: the command's part on top of
:mod:`evals.runner`. With ``--model RECORD`` (a run record directory) the record's own end-of-run
settings (:func:`harness.generation.record_eval_settings`) fill every flag not given, so the
exported model is evaluated as the record's ``eval.json`` was."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_eval(args: argparse.Namespace) -> int:
    from evals.runner import run_eval, run_suite

    generate = None
    if (args.predictions is None) == (args.model is None):
        print("mrbench eval: give exactly one of --predictions FILE or --model M", file=sys.stderr)
        return 2
    if args.format is not None and args.predictions is None:
        print("mrbench eval: --format names the format of a --predictions file", file=sys.stderr)
        return 2
    if len(args.name) > 1 and args.model is None:
        print("mrbench eval: several benchmarks need --model (a predictions file belongs to one benchmark)",
              file=sys.stderr)
        return 2
    if args.model is not None:
        from harness.generation import ModelArgError, backend_generate

        try:
            generate = backend_generate(args.model, backend=args.backend, config=args.config,
                                        overrides=_eval_settings(args))
        except ModelArgError as exc:
            print(f"mrbench eval: {exc}", file=sys.stderr)
            return 2
        print(f"generating with {args.model}" + (f"; each benchmark's time is estimated first (--max-minutes "
                                                 f"{args.max_minutes:g})" if args.max_minutes else ""))
    if len(args.name) > 1:
        def finished(name: str, result: dict[str, Any]) -> None:
            print(f"{name}:\n{result.get('table', '')}\n{name} results -> {args.out}/{name}\n")

        summary = run_suite(args.name, out_dir=args.out, generate=generate, model=args.model, data_dir=args.data_dir,
                            categories=args.categories, limit=args.limit, max_new_tokens=args.max_new_tokens,
                            max_minutes=args.max_minutes, on_result=finished)
        if summary.get("average_table"):
            print(summary["average_table"])
        print(f"results -> {args.out} (suite.json: every summary and the averages)")
        return 0
    summary = run_eval(args.name[0], out_dir=args.out, predictions=args.predictions, generate=generate,
                       model=args.model, data_dir=args.data_dir, categories=args.categories, limit=args.limit,
                       max_new_tokens=args.max_new_tokens, predictions_format=args.format,
                       max_minutes=args.max_minutes)
    if summary.get("predictions_format"):
        print(f"predictions read as {summary['predictions_format']}")
    for warning in summary.get("prediction_warnings", []):
        print(f"mrbench eval: warning: {warning}", file=sys.stderr)
    print(summary.get("table", ""))
    print(f"results -> {args.out}")
    return 0


def _eval_settings(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The generating backend's config overrides for ``mrbench eval --model``: ``--dtype`` and
    ``--attention``; for a run record, its own end-of-run settings fill every flag not given
    (``args`` is updated: limit, max new tokens, data dir), and one line says which it used."""
    from harness.generation import record_eval_settings

    settings = record_eval_settings(args.model) if args.config is None else None
    pairs: list[tuple[str, str]] = []
    if settings is not None:
        given = []
        if args.limit is None:
            args.limit = settings.limit
        else:
            given.append("--limit")
        if args.max_new_tokens is None:
            args.max_new_tokens = settings.max_new_tokens
        else:
            given.append("--max-new-tokens")
        if args.data_dir is None:
            args.data_dir = settings.data_dir
        flagged = {"model.dtype": args.dtype, "backend.local.rollout_attention": args.attention}
        pairs = [(k, v) for k, v in settings.overrides() if not flagged.get(k)]
        given += [flag for flag, value in (("--dtype", args.dtype), ("--attention", args.attention)) if value]
        print(f"the record's evaluation settings: {settings.describe()}"
              + (f" ({', '.join(given)} as given)" if given else " (--limit, --max-new-tokens, --dtype and "
                 "--attention override them)"))
    if args.dtype:
        pairs.append(("model.dtype", args.dtype))
    if args.attention:
        pairs.append(("backend.local.rollout_attention", args.attention))
    return pairs
