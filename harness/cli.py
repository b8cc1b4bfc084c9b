"""The ``mrbench`` command.

    mrbench list                                   registered tasks, algorithms, backends, evaluators; models
    mrbench run [--config RECIPE] [--task T] [--algo A] [--model M] [--seed N] [--x.y VALUE ...] [--dry-run]
    mrbench run --help [--algo A]                  every config field (and algorithm A's parameters)
    mrbench config show [--config RECIPE] [overrides ...]   the resolved config as YAML (= config.json)
    mrbench score TASK --data FILE.jsonl --out FILE.jsonl [--data-dir DIR]
    mrbench eval NAME (--predictions FILE [--format F] | --model M) --out DIR [--data-dir DIR] [--categories C ...]
    mrbench eval NAME NAME ... --model M --out DIR   (several benchmarks, with cross-benchmark averages)
    mrbench leaderboard [--root results] [--out FILE.md] [--pool-across-versions]
    mrbench sweep GRID.yaml [--executor inline|local|ray] [--jobs N] [--address A] [--root DIR] [--reuse-from DIR]
                 [--dry-run | --status]
                 [--until-resolved [--baseline ALGO] [--metric BENCH/KEY] [--effect E] [--max-seeds N] [--round-size K]]
    mrbench report --root DIR --out DIR [--baseline gdpo] [--threshold X] [--min-seeds 3] [--pool-across-versions]
    mrbench verify RECORD [--steps 2]              rerun a record's first steps here: does it reproduce?
    mrbench credit RECORD [--step N] --out PAGE.html       per-token credit page (or --model M --task T --data F)
    mrbench localize [--model M] [--task T] [--n 32] --out DIR   where each reward's replay distance falls
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from mrbench_core.errors import DataError
from mrbench_core.registry import RegistryError, UnknownNameError

CONFIG_SHORTCUTS = ("task", "algo", "model", "seed", "backend")
POOL_HELP = ("one row per configuration even where its records' numerics differ (another commit, device class or "
             "versions; a record without a fingerprint counts as unknown); the output says which rows mix. Default: "
             "such records are separate rows, labelled by what differs (docs/comparability.md)")
#: ``mrbench eval --model``: the default bound on a benchmark's estimated generation time
DEFAULT_MAX_MINUTES = 60.0
#: the exit status after Ctrl-C / SIGTERM (128 + SIGINT, as a shell reports it)
INTERRUPTED_EXIT = 130


def _split_overrides(extra: Sequence[str], command: str = "run") -> list[tuple[str, str]]:
    """``["--algo.beta", "0.25", "--seed=3"]`` -> ``[("algo.beta", "0.25"), ("seed", "3")]``."""
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--") or len(tok) <= 2:
            raise SystemExit(f"mrbench {command}: unexpected argument {tok!r} "
                             f"(overrides look like --section.field VALUE)")
        key = tok[2:]
        if "=" in key:
            key, value = key.split("=", 1)
            i += 1
        else:
            if i + 1 >= len(extra) or (extra[i + 1].startswith("--") and not _is_number(extra[i + 1])):
                raise SystemExit(f"mrbench {command}: override --{key} needs a value")
            value = extra[i + 1]
            i += 2
        pairs.append((field_path(key), value))
    return pairs


def field_path(key: str) -> str:
    """Hyphens in a dotted field path become underscores (``--task.options.max-chars``), except in
    the backend name of ``backend.options.NAME.KEY``, which keeps its registered spelling."""
    if "." not in key:
        return key
    parts = key.split(".")
    name_at = 2 if parts[:2] == ["backend", "options"] else None
    return ".".join(p if i == name_at else p.replace("-", "_") for i, p in enumerate(parts))


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def registries() -> dict[str, list[tuple[str, str]]]:
    """(name, description) of every registered task, algorithm, backend and evaluator."""
    from algorithms.catalog import describe_algorithms
    from evals.registry import EVALUATORS
    from harness.backends import BACKENDS
    from harness.models import describe_models
    from tasks.registry import TASKS

    return {"tasks": TASKS.describe(), "algorithms": describe_algorithms(), "backends": BACKENDS.describe(),
            "evaluators": EVALUATORS.describe(), "models": describe_models()}


def cmd_list(args: argparse.Namespace) -> int:
    for title, rows in registries().items():
        print(f"{title}:")
        width = max((len(n) for n, _ in rows), default=0)
        for name, desc in rows:
            print(f"  {name.ljust(width)}  {desc}")
        print()
    return 0


def _resolve_config(args: argparse.Namespace, extra: Sequence[str], command: str) -> Any:
    """The RunConfig of ``--config`` plus shortcuts and overrides; None (after saying why) when invalid."""
    from harness.config import ConfigError, resolve

    pairs = []
    for key in CONFIG_SHORTCUTS:
        value = getattr(args, key)
        if value is not None:
            pairs.append((key, str(value)))
    pairs += _split_overrides(extra, command)
    try:
        return resolve(args.config, pairs)
    except ConfigError as exc:
        print(f"mrbench {command}: {exc}", file=sys.stderr)
        return None


def cmd_run(args: argparse.Namespace, extra: Sequence[str]) -> int:
    from harness.runner import dry_run, run

    cfg = _resolve_config(args, extra, "run")
    if cfg is None:
        return 2
    if args.base_model:
        from harness.base_model import evaluate_base

        return evaluate_base(cfg)
    return dry_run(cfg) if args.dry_run else run(cfg)


def cmd_config_show(args: argparse.Namespace, extra: Sequence[str]) -> int:
    cfg = _resolve_config(args, extra, "config show")
    if cfg is None:
        return 2
    from algorithms.catalog import get_algorithm
    from harness.resolved import resolved_task_options

    cfg.algo.params = get_algorithm(cfg.algo.name, **cfg.algo.params).config_dict()  # as config.json will
    cfg.task.options = resolved_task_options(cfg.task.name, cfg.task.options)
    print(cfg.to_yaml(), end="")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from harness.scoring import score_file

    scored = score_file(args.task, args.data, args.out, data_dir=args.data_dir)
    for warning in scored.warnings():
        print(f"mrbench score: warning: {warning}", file=sys.stderr)
    print(f"scored {scored.rows} rows -> {args.out}")
    table = scored.table()
    if table:
        print(table)
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from harness.leaderboard import build_leaderboard

    table = build_leaderboard(args.root, args.out, args.pool_across_versions)
    print(table)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from harness.sweep.command import SweepOptions
    from harness.sweep.command import cmd_sweep as run_sweep

    return run_sweep(SweepOptions(grid=args.grid, executor=args.executor, jobs=args.jobs, address=args.address,
                                  retries=args.retries, only=args.only, dry_run=args.dry_run, status=args.status,
                                  loggers=args.loggers, root=args.root, until_resolved=args.until_resolved,
                                  baseline=args.baseline, metrics=args.metric, effect=args.effect,
                                  max_seeds=args.max_seeds, round_size=args.round_size, reuse_from=args.reuse_from))


def cmd_report(args: argparse.Namespace) -> int:
    import shutil

    from harness.report.command import ReportOptions, verdict_lines, write_report

    written = write_report(ReportOptions(root=args.root, out=args.out, baseline=args.baseline,
                                         threshold=args.threshold, min_seeds=args.min_seeds, effect=args.effect,
                                         strict=args.strict, pool_across_versions=args.pool_across_versions))
    width = max(60, min(100, shutil.get_terminal_size((100, 24)).columns - 1))
    lines = verdict_lines(written.verdict, width)
    for line in lines:
        print(line)
    if lines:
        print("wrote:")
    for path in written.paths:
        print(f"  {path}" if lines else path)
    return 0


def _add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML recipe file or shipped recipe name (e.g. toolcall-paper)")
    parser.add_argument("--task", help="sets task.name")
    parser.add_argument("--algo", help="sets algo.name")
    parser.add_argument("--model", help="sets model.name")
    parser.add_argument("--backend", help="sets backend.name")
    parser.add_argument("--seed", type=int, help="the run seed")


def config_epilog(algorithm: str | None = None) -> str:
    """The fields listed under ``--help`` of the commands that take a run config."""
    from harness.config_help import ALGORITHM_HINT, algorithm_fields_help, run_config_help

    return run_config_help() + "\n\n" + (algorithm_fields_help(algorithm) if algorithm else ALGORITHM_HINT)


def _wrapped(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, 100))


def algorithm_named(argv: Sequence[str]) -> str | None:
    """The algorithm named by ``--algo A``, ``--algo=A`` or ``--algo.name A`` in ``argv``, if any."""
    for i, tok in enumerate(argv):
        for flag in ("--algo", "--algo.name"):
            if tok == flag and i + 1 < len(argv):
                return argv[i + 1]
            if tok.startswith(flag + "="):
                return tok.split("=", 1)[1]
    return None


def build_parser(help_algorithm: str | None = None, with_config_fields: bool = False) -> argparse.ArgumentParser:
    """``with_config_fields``: list every config field under ``run --help`` and ``config show --help``
    (and the parameters of ``help_algorithm``)."""
    from harness.config import MODEL_DTYPES, ROLLOUT_ATTENTIONS

    parser = argparse.ArgumentParser(prog="mrbench", description="Multi-reward RL benchmark harness")
    sub = parser.add_subparsers(dest="command", required=True)
    epilog = config_epilog(help_algorithm) if with_config_fields else None

    sub.add_parser("list", help="registered tasks, algorithms, backends and evaluators, and the models")

    def config_command(parent: Any, name: str, help_text: str, description: str) -> argparse.ArgumentParser:
        """A command that takes a run config (--config, shortcuts, dotted overrides), listed in --help."""
        cmd = parent.add_parser(name, help=help_text, description=_wrapped(description), epilog=epilog,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_config_arguments(cmd)
        return cmd

    run = config_command(sub, "run", "train and evaluate one task x algorithm x model x seed cell",
                         "Train and evaluate one cell. Any config field below can be set with --FIELD VALUE, e.g. "
                         "--algo.beta 0.25 --sampling.group_size 4; mrbench config show prints the resolved config.")
    run.add_argument("--dry-run", action="store_true",
                     help="check the run and print what the backend would launch (for openrlhf: the OpenRLHF "
                          "command line and the placement of actors and engines), without training")
    run.add_argument("--base-model", action="store_true",
                     help="train nothing: evaluate the untrained model as this run's end-of-run evaluation would "
                          "(same benchmarks, held-out cases and decoding) into a base record, "
                          "ROOT/<task>/base/<model>/eval-<hash> (mrbench report's base row)")
    config = sub.add_parser("config", help="inspect run configs")
    config_sub = config.add_subparsers(dest="config_command", required=True, help="show: the resolved config")
    config_command(config_sub, "show", "print the resolved run config as YAML (what config.json records)",
                   "Print the run config that mrbench run would use, resolved from the defaults, --config and the "
                   "overrides, as YAML: the content of the record's config.json, and a valid recipe.")

    score = sub.add_parser("score", help="score responses in a JSONL file with a task's verifiers")
    score.add_argument("task", help="the task whose verifiers score the rows (mrbench list)")
    score.add_argument("--data", required=True, help="JSONL rows: the task's example fields plus 'response'")
    score.add_argument("--out", required=True, help="JSONL output: per row its rewards, verifier blocks and reasons")
    score.add_argument("--data-dir", help="dataset root the rows refer to (e.g. Spider's databases)")

    ev = sub.add_parser("eval", help="evaluate predictions (or a model) on a benchmark")
    ev.add_argument("name", nargs="+", help="benchmark name(s); several with --model write DIR/<name>/ each "
                    "and suite.json with cross-benchmark averages (e.g. the text-to-SQL paper average)")
    ev.add_argument("--predictions", help="raw model outputs: JSONL rows {id, response}, or the benchmark's "
                    "official format (Spider SQL lines, BIRD predict_dev.json, IFEval prompt/response rows, "
                    "BFCL result files)")
    ev.add_argument("--format", help="the predictions' format (detected when omitted): jsonl, ifeval-responses, "
                    "sql-lines, bird-json, bfcl-result")
    ev.add_argument("--model", help="generate greedily with this model first, through the configured backend; "
                                    "a run record directory means its saved model/")
    ev.add_argument("--backend", help="backend that generates for --model (default: the config's, local)")
    ev.add_argument("--config", help="run recipe whose model and backend settings --model generation uses")
    ev.add_argument("--out", required=True, help="output folder: results.jsonl, summary.json/.md, skipped.jsonl "
                    "(and predictions.jsonl with --model); with several benchmarks, one folder per benchmark "
                    "and suite.json")
    ev.add_argument("--data-dir", help="the benchmark's data in its official layout: a dataset root holding "
                    "spider/, bird/, ifeval/, ... or the benchmark's own folder (the README's Data section); "
                    "default: the evaluator's own (ifollow-heldout needs none, bfcl-v4 uses bfcl-eval's data)")
    ev.add_argument("--categories", nargs="+", metavar="C", help="only these categories of the benchmark "
                    "(bfcl-v4: simple_python, multiple, parallel, live_simple, ...; an unknown one lists the "
                    "known ones)")
    ev.add_argument("--limit", type=int, help="evaluate only the first N cases (default: all; for a run record, "
                    "its end-of-run schedule.eval_limit)")
    ev.add_argument("--max-new-tokens", type=int, default=None, help="longest generated response with --model "
                    "(default: the benchmark's own, e.g. 1024 for text-to-SQL; for a run record, its "
                    "schedule.eval_max_new_tokens)")
    ev.add_argument("--dtype", choices=MODEL_DTYPES, metavar="DTYPE", help="with --model: the precision to decode "
                    f"in, model.dtype: {', '.join(MODEL_DTYPES)} (default: a record's own, else the config's)")
    ev.add_argument("--attention", choices=ROLLOUT_ATTENTIONS, metavar="NAME", help="with --model: the attention "
                    f"implementation, backend.local.rollout_attention: {', '.join(ROLLOUT_ATTENTIONS)} (default: a "
                    "record's own, else the config's)")
    ev.add_argument("--max-minutes", type=float, default=DEFAULT_MAX_MINUTES,
                    help="with --model: estimate each benchmark's generation time on this machine first and "
                         f"refuse to start one estimated to take longer (default {DEFAULT_MAX_MINUTES:g}; 0: no "
                         "bound and no estimate)")

    lb = sub.add_parser("leaderboard", help="aggregate run records across seeds, one row per configuration",
                        description=_wrapped("One row per configuration and numerics, grouped as `mrbench report` "
                                             "groups them (every setting but the seed, output and execution "
                                             "fields; records whose numerics may differ apart), then "
                                             "which records each row merged, which configurations of the same "
                                             "algorithm and model it kept apart, and which records it left out."))
    lb.add_argument("--root", default="results", help="the directory holding the run records (default: results)")
    lb.add_argument("--out", help="also write the table (Markdown) here")
    lb.add_argument("--pool-across-versions", action="store_true", help=POOL_HELP)

    sw = sub.add_parser("sweep", help="run a grid of cells (tasks x algorithms x models x seeds ...)",
                        description=_wrapped("Expand a grid file into cells, each with its own record directory, "
                                             "and run those not finished yet (interrupted ones resume). "
                                             "See docs/sweeps-and-reports.md for the grid file."))
    sw.add_argument("grid", help="the grid file (YAML)")
    sw.add_argument("--executor", choices=("inline", "local", "ray"), default="local",
                    help="inline: in this process; local: --jobs subprocesses; ray: Ray tasks (default: local)")
    sw.add_argument("--jobs", "-j", type=int, help="local: parallel cells, sharing the cores (default 1); "
                    "ray: most cells in flight (default: as Ray's resources allow)")
    sw.add_argument("--address", help="ray: the cluster to join (default: start a local Ray instance)")
    sw.add_argument("--retries", type=int, default=0, help="rerun a failed cell up to this many times")
    sw.add_argument("--loggers", metavar="NAMES", help="every cell also logs to these (tensorboard, wandb, mlflow; "
                    "comma-separated), one logger run per cell grouped by the sweep's name (docs/logging.md)")
    sw.add_argument("--root", help="put the cells' records here instead of the grid's root (e.g. to rerun a grid "
                    "whose committed records are finished: results/sweeps/NAME-rerun)")
    sw.add_argument("--only", nargs="+", metavar="GLOB", help="only the cells whose record path below the "
                    "root matches, e.g. 'ifollow/mrtpo/*'")
    sw.add_argument("--reuse-from", metavar="DIR", help="copy the finished records under DIR whose configuration "
                    "is the cell's (their place aside) into cells not run yet, e.g. an earlier reference's seeds")
    ad = sw.add_argument_group("adaptive seeds (docs/adaptive-sweeps.md)")
    ad.add_argument("--until-resolved", action="store_true", help="run the grid's seeds as a first round, then "
                    "--round-size more per arm at a time until each arm's comparison with --baseline is resolved "
                    "(its anytime-valid interval excludes 0 or is at most ±--effect wide) or has --max-seeds")
    ad.add_argument("--baseline", default="gdpo", help="the algorithm every arm is compared with (default: gdpo)")
    ad.add_argument("--metric", action="append", metavar="BENCH/KEY", help="an end-of-run benchmark number to "
                    "decide on, e.g. ifollow-heldout/instruction_level (repeatable; default: every one the first "
                    "round's records share)")
    ad.add_argument("--effect", type=float, default=0.01, help="an interval at most this wide either side of its "
                    "centre resolves the comparison (default 0.01)")
    ad.add_argument("--max-seeds", type=int, default=12, help="the most seeds an arm gets (default 12)")
    ad.add_argument("--round-size", type=int, default=2, help="seeds added per open arm each round after the "
                    "first (default 2)")
    mode = sw.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="list the cells and their record directories")
    mode.add_argument("--status", action="store_true", help="show each cell's state: pending, running, "
                      "failed, finished")

    rp = sub.add_parser("report", help="tables with intervals, learning curves and steps-to-threshold from records",
                        description=_wrapped("Aggregate the finished records under --root across seeds and write "
                                             "leaderboard.md/.csv/.json, the learning-curve figures and "
                                             "report.html to --out."))
    rp.add_argument("--root", default="results", help="where the records are (searched recursively)")
    rp.add_argument("--out", required=True, help="output directory")
    rp.add_argument("--baseline", default="gdpo", help="algorithm the others are compared with (default gdpo)")
    rp.add_argument("--threshold", type=float, help="steps-to-threshold target for every reward family "
                    "(default: the baseline's final value)")
    rp.add_argument("--min-seeds", type=int, default=3, help="fewer paired seeds than this: 'too few seeds "
                    "to tell' (default 3)")
    rp.add_argument("--effect", type=float, help="the difference 'seeds needed' is for: the seeds at which a paired "
                    "test detects it at 80%% power (default: one point of each column's scale, 0.01 for shares)")
    rp.add_argument("--strict", action="store_true", help="exit 2 when the root holds no finished run "
                    "(default: a warning, and an empty report)")
    rp.add_argument("--pool-across-versions", action="store_true", help=POOL_HELP)

    vf = sub.add_parser("verify", help="rerun a record's first steps on this machine and say whether they reproduce it",
                        description=_wrapped("Rerun the first --steps steps of a record from its config.json and seed, "
                                             "in a temporary directory, and compare every stored key of its "
                                             "metrics, sample and credit rows (wall-clock times aside). One line: "
                                             "reproduces bit for bit, reproduces within tolerance (the same numerics "
                                             "fingerprint on another device class), or does not reproduce (the first "
                                             "step and key, and what differs: commit, device, versions). Exit status "
                                             "0 when it reproduces, 1 when not, 2 when it cannot rerun (its data "
                                             "differs, files are missing)."))
    vf.add_argument("record", help="the run record's directory")
    vf.add_argument("--steps", type=int, default=2, help="how many of its first steps to rerun (default 2)")

    from harness.credit.cli import add_parsers

    add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_help = any(tok in ("-h", "--help") for tok in argv)
    parser = build_parser(algorithm_named(argv) if wants_help else None, with_config_fields=wants_help)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("run", "config"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "list":
            return cmd_list(args)
        if args.command == "run":
            return cmd_run(args, extra)
        if args.command == "config":
            return cmd_config_show(args, extra)
        if args.command == "score":
            return cmd_score(args)
        if args.command == "eval":
            from harness.eval_command import cmd_eval

            return cmd_eval(args)
        if args.command == "leaderboard":
            return cmd_leaderboard(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "verify":
            from harness.verify import cmd_verify

            return cmd_verify(args)
        if args.command in ("credit", "localize"):
            from harness.credit.cli import cmd_credit, cmd_localize

            return cmd_credit(args) if args.command == "credit" else cmd_localize(args)
    except (UnknownNameError, RegistryError) as exc:
        print(f"mrbench {args.command}: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"mrbench {args.command}: {exc}", file=sys.stderr)
        return 2
    except (DataError, ValueError) as exc:  # bad data or a bad option value: the message says which
        print(f"mrbench {args.command}: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:  # an optional dependency a command needs (ray, matplotlib)
        print(f"mrbench {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM: one line, no traceback
        why = str(exc)
        resume = "" if "resume" in why or args.command != "run" else "; rerun the same command to resume"
        print(f"\nmrbench {args.command}: interrupted" + (f" ({why})" if why else "") + resume, file=sys.stderr)
        return INTERRUPTED_EXIT
    return 1


if __name__ == "__main__":
    sys.exit(main())
