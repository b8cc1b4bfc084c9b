"""Time the whole Spider dev evaluation with every gold query used as the prediction.

Usage: ``python bench/spider_dev_eval.py [DATA_DIR]`` (default: ``$MRBENCH_DATA_DIR``), where
DATA_DIR holds ``spider/dev.json`` and ``spider/database/``. Prints the time to build the cases
(prompts rendered from each database) and the time to score them with a cold reference cache
(every reference and every prediction executed once in the sandbox), the execution accuracy over
scored questions, and the skipped questions by reason. The target is under 2 minutes.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

from evals.text2sql import spider_dev
from tasks.text2sql.templates import render_teacher_answer


def main(argv: list[str]) -> int:
    data_dir = argv[1] if len(argv) > 1 else os.environ.get("MRBENCH_DATA_DIR")
    if not data_dir or data_dir.startswith("-") or len(argv) > 2:
        print("usage: spider_dev_eval.py DATA_DIR (or set MRBENCH_DATA_DIR)", file=sys.stderr)
        return 0 if data_dir in ("-h", "--help") else 2
    evaluator = spider_dev()
    t0 = time.perf_counter()
    cases = evaluator.cases(data_dir)
    t1 = time.perf_counter()
    responses = {c.id: render_teacher_answer(c.meta["query"]) for c in cases}
    report = evaluator.score(cases, responses)
    t2 = time.perf_counter()
    s = report.summary
    print(f"spider-dev: {s['n_cases']} questions, {s['n_scored']} scored, {s['n_correct']} correct, "
          f"{s['n_skipped']} skipped; execution accuracy {100 * s['execution_accuracy']:.2f}%")
    for reason, n in Counter(r["reason"].split(" (")[0] for r in report.skipped).items():
        print(f"  skipped {n}: {reason}")
    print(f"cases: {t1 - t0:.2f} s; scoring (cold cache): {t2 - t1:.2f} s; total: {t2 - t0:.2f} s")
    return 0 if s["n_correct"] == s["n_scored"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
