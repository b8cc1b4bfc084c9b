"""Per-constraint IFBench verdicts on the sample responses, written as JSONL.

Usage: ``python bench/ifbench_sample_verdicts.py [DATA_DIR] [OUT.jsonl]`` (DATA_DIR defaults to
``$MRBENCH_DATA_DIR``; OUT defaults to ``results/ifbench_sample_verdicts.jsonl``). DATA_DIR holds
``ifbench/IFBench_test.jsonl`` and ``ifbench/sample_output.jsonl`` (rows ``prompt``, ``response``).

Sample rows carry no instruction ids, so each is joined to its test row by prompt, tolerating
leading/trailing whitespace as IFBench's evaluator does. One output line per (row, constraint):
``key, index, instruction_id, kwargs`` (nulls dropped), ``strict``, ``loose``, ``reason`` and the
``spans`` read (strict). Prints the four IFBench figures (prompt/instruction level, strict/loose)
and the time taken.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import tasks.ifollow.constraints.ifbench  # noqa: F401  (registers the types)
from tasks.ifollow.constraints.base import check, clean_kwargs


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: row {n} is not JSON ({exc})") from exc
    return rows


def joined(data_dir: Path) -> list[tuple[dict[str, Any], str]]:
    """(test row, response) for every sample response whose prompt matches a test prompt."""
    tests = load_jsonl(data_dir / "ifbench" / "IFBench_test.jsonl")
    by_prompt = {r["prompt"].strip(): r for r in tests}
    out = []
    for row in load_jsonl(data_dir / "ifbench" / "sample_output.jsonl"):
        test = by_prompt.get(str(row.get("prompt", "")).strip())
        if test is not None:
            out.append((test, str(row.get("response") or "")))
    return out


def verdicts(pairs: list[tuple[dict[str, Any], str]]) -> list[dict[str, Any]]:
    lines = []
    for test, response in pairs:
        for index, (cid, kwargs) in enumerate(zip(test["instruction_id_list"], test["kwargs"])):
            kw = clean_kwargs(kwargs)
            strict = check(cid, response, kw)
            loose = check(cid, response, kw, loose=True)
            lines.append({"key": str(test["key"]), "index": index, "instruction_id": cid, "kwargs": kw,
                          "strict": strict.ok, "loose": loose.ok, "reason": strict.reason,
                          "spans": [list(s) for s in strict.spans]})
    return lines


def figures(lines: list[dict[str, Any]]) -> dict[str, float]:
    """IFBench's four figures: prompt-level and instruction-level accuracy, strict and loose."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_key.setdefault(line["key"], []).append(line)
    out = {}
    for mode in ("strict", "loose"):
        out[f"prompt_{mode}"] = sum(all(x[mode] for x in v) for v in by_key.values()) / max(len(by_key), 1)
        out[f"instruction_{mode}"] = sum(x[mode] for x in lines) / max(len(lines), 1)
    return out


def main(argv: list[str]) -> int:
    data_dir = argv[1] if len(argv) > 1 else os.environ.get("MRBENCH_DATA_DIR")
    if not data_dir:
        print("usage: ifbench_sample_verdicts.py DATA_DIR [OUT.jsonl] (or set MRBENCH_DATA_DIR)", file=sys.stderr)
        return 2
    out = Path(argv[2] if len(argv) > 2 else "results/ifbench_sample_verdicts.jsonl")
    t0 = time.perf_counter()
    pairs = joined(Path(data_dir))
    lines = verdicts(pairs)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    f = figures(lines)
    print(f"ifbench sample: {len(pairs)} responses joined, {len(lines)} constraints -> {out}")
    print("prompt-level strict {prompt_strict:.4f} loose {prompt_loose:.4f}; "
          "instruction-level strict {instruction_strict:.4f} loose {instruction_loose:.4f}".format(**f))
    print(f"time: {time.perf_counter() - t0:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
