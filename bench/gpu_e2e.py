"""The local backend end to end on a GPU (issue 53), in one time-guarded run:

    python bench/gpu_e2e.py                         # CUDA: agreement, then the CLI cell (about 2.5 minutes)
    python bench/gpu_e2e.py --device cpu            # the CPU form: the same code, tiny shapes, 6 algorithms
    python bench/gpu_e2e.py --sections band-check --bands bench/bands/gpu-cell-nvidia-h200.json

Sections, each with its share of ``--budget`` seconds (the rest of a section is skipped, saying so,
when what comes next would not fit; an error ends its section only):

1. ``agreement`` (:mod:`gpu_agreement`): one step of every registered algorithm on ``tiny-random``,
   on ``--device`` and on the CPU, on the CPU's samples, against stated float32 and bf16 tolerances;
2. ``cell`` (:mod:`gpu_cell`): ``mrbench run`` through the CLI on a random model of SmolLM2-135M's
   shape (written to a local folder with an offline tokenizer), SIGTERM and resume, export,
   ``mrbench eval --model``, the determinism of the resume, the bands file and, where
   ``harness/numerics.py`` exists, the fingerprint and ``mrbench verify``;
3. ``band-check``: the uninterrupted cell alone, checked against ``--bands`` (exit 1 outside them).

Results go to ``--out`` (default ``$OUT``): ``e2e.json`` (rewritten as each figure comes),
``cell-bands-<gpu>.json`` (the bands to commit under ``bench/bands/``) and ``cell-metrics.jsonl``.
The CPU form runs the cell on ``tiny-qwen2`` (a two-layer Qwen2 of :data:`gpu_common.SHAPES`).
Exit status: 0 when every check reached held, 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_cell
from gpu_agreement import agreement
from gpu_common import TOKENIZER_DIR, Clock, Results, environment, offline_tokenizer, out_dir, write_model_dir

#: each section's share of the budget
SHARES = {"agreement": 0.25, "cell": 0.75, "band-check": 1.0}
#: the CPU form's algorithms: one per replay kind (none, leave-one-out, joint, rubric, teacher, read spans,
#: entropy, token ids, feedback), one of them a composite
CPU_FORM_ALGORITHMS = ("gdpo", "mrtpo", "mrtpo-joint", "cort", "opsd", "mrtpo-oracle+saw", "gtpo", "ktae", "sdpo")


def summary(data: dict) -> str:
    """The Markdown for bench/README.md: the agreement table, the cell's checks and its bands."""
    env = data.get("environment", {})
    commit = (env.get("commit") or {}).get("commit") or "?"
    lines = [(f"`bench/gpu_e2e.py` on {env.get('gpu') or 'CPU'} (torch {env.get('torch')}, transformers "
             f"{env.get('transformers')}), commit {commit[:9]}, {env.get('date')}."), ""]
    if data.get("agreement"):
        lines += [("| algorithm | dtype | adv | stat | loss | grad-norm ratio | pairs | tolerance (adv, stat, loss, grad) "
                  "| verdict |"), "|---|---|---|---|---|---|---|---|---|"]
        for r in data["agreement"]:
            cells = [("-" if r[k] is None else f"{r[k]:.1e}") for k in ("adv", "stat", "loss")]
            tol = ", ".join(f"{t:.0e}" for t in r["tolerance"])
            lines.append(f"| {r['algorithm']} | {r['dtype']} | {' | '.join(cells)} | {r['grad_ratio']:.5f} | "
                         f"{r['pairs']} | {tol} | {'ok' if r['ok'] else 'OUTSIDE'} |")
        lines.append("")
    for key in ("cell/figures", "cell/resume", "cell/resume_verdict", "cell/eval", "cell/deterministic", "cell/numerics",
                "cell/band_check"):
        if key in data:
            value = data[key]
            if key == "cell/eval" and isinstance(value, dict):
                value = {"status": value.get("status"), "summary written": value.get("summary") is not None}
            lines.append(f"- {key.split('/')[1]}: `{json.dumps(value, default=str)[:600]}`")
    for key, value in sorted(data.items()):
        if key.startswith("section/"):
            lines.append(f"- section {key.split('/')[1]}: {value['status']} ({value['seconds']} s)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sections", nargs="+", default=["agreement", "cell"], choices=list(SHARES))
    ap.add_argument("--budget", type=float, default=170.0, help="seconds for all sections (default 170)")
    ap.add_argument("--out", default=None, help="results folder (default: $OUT; none: print only)")
    ap.add_argument("--work", default=None, help="folder for the model and the records (default: a temporary one)")
    ap.add_argument("--tokenizer", default=str(TOKENIZER_DIR),
                    help="tokenizer folder, or 'byte' (default: the carried SmolLM2 tokenizer, else bytes)")
    ap.add_argument("--shape", default=None, help="the cell's model shape (default: smollm2-135m on CUDA, "
                                                   "tiny-qwen2 on CPU)")
    ap.add_argument("--algorithms", nargs="+", default=None, help="agreement: only these (default: every registered "
                                                                  "one; the CPU form: one per replay kind)")
    ap.add_argument("--bands", default=None, help="band-check: the bands file to check the cell against")
    args = ap.parse_args(argv)
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_e2e: no CUDA device; the CPU form is --device cpu", file=sys.stderr)
        return 2
    if "band-check" in args.sections and not args.bands:
        print("gpu_e2e: band-check needs --bands FILE", file=sys.stderr)
        return 2
    out = out_dir(args.out)
    results = Results(out / "e2e.json" if out else None)
    clock = Clock(results)
    env = environment()
    results.put("environment", env)
    clock.say(f"gpu_e2e on {args.device} ({env['gpu'] or 'no GPU'}), torch {env['torch']}, transformers "
              f"{env['transformers']}, commit {(env['commit'].get('commit') or '?')[:9]}"
              f"{' (dirty)' if env['commit'].get('dirty') else ''}, budget {args.budget:.0f} s")
    work = Path(args.work or tempfile.mkdtemp(prefix="mrbench-gpu-e2e-"))
    ok = True
    if "agreement" in args.sections:
        with clock.section("agreement", SHARES["agreement"] * args.budget) as sec:
            names = args.algorithms or (list(CPU_FORM_ALGORITHMS) if args.device == "cpu" else None)
            ok &= agreement(clock, sec, results, args.device, names)
    cell = [s for s in args.sections if s in ("cell", "band-check")]
    if cell:
        with clock.section(cell[0], SHARES[cell[0]] * args.budget) as sec:
            shape = args.shape or ("tiny-qwen2" if args.device == "cpu" else "smollm2-135m")
            tokenizer, what = offline_tokenizer(None if args.tokenizer == "byte" else Path(args.tokenizer))
            model_dir = write_model_dir(work / f"{shape}-shape", shape, tokenizer)
            clock.say(f"cell model: random {shape} shape in {model_dir.name}, tokenizer: {what}")
            slug = re.sub(r"[^a-z0-9]+", "-", (env["gpu"] or "cpu").lower()).strip("-")
            bands_out = out / f"cell-bands-{slug}.json" if out and cell[0] == "cell" else None
            ok &= gpu_cell.run_cell(clock, sec, results, model_dir, work, args.device, bands_out,
                                    Path(args.bands) if cell[0] == "band-check" else None, env)
            if out and (work / "A" / "metrics.jsonl").exists():
                (out / "cell-metrics.jsonl").write_text((work / "A" / "metrics.jsonl").read_text())
    if out:
        (out / "e2e-table.md").write_text(summary(results.data), encoding="utf-8")
    failed = [k for k, v in results.data.items() if k.startswith("section/") and v["status"] != "done"]
    clock.say(f"gpu_e2e: {'every check held' if ok and not failed else 'NOT every check held'}"
              + (f"; sections not done: {', '.join(f.split('/')[1] for f in failed)}" if failed else "")
              + f" ({clock.elapsed():.0f} s)")
    if out:
        clock.say(f"results: {json.dumps(sorted(p.name for p in out.iterdir()))}")
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
