"""How many MulDimIF constraints parse into programmatic checks, by constraint type.

Usage: ``python bench/muldimif_coverage.py [DATA_DIR]`` (default ``$MRBENCH_DATA_DIR``), where
DATA_DIR holds ``muldimif/test.json``. Prints parsed/total, the count per ``muldimif:*`` type, the
constraints that name nothing checkable (``keywords:unstated``, ``markdown:unchecked``) and any
triple no rule reads (row id, index, text, reason); exits 1 if any does not parse.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tasks.ifollow.constraints.muldimif import coverage


def main(argv: list[str]) -> int:
    data_dir = argv[1] if len(argv) > 1 else os.environ.get("MRBENCH_DATA_DIR")
    if not data_dir:
        print("usage: muldimif_coverage.py DATA_DIR (or set MRBENCH_DATA_DIR)", file=sys.stderr)
        return 2
    path = Path(data_dir) / "muldimif" / "test.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    cov = coverage(rows)
    print(f"muldimif: {cov['parsed']}/{cov['total']} constraints of {len(rows)} rows parse "
          f"({time.perf_counter() - t0:.2f} s)")
    for cid, n in sorted(cov["by_type"].items(), key=lambda kv: -kv[1]):
        note = "  (nothing checkable: holds)" if cid.endswith((":unstated", ":unchecked")) else ""
        print(f"  {n:5d}  {cid}{note}")
    for rid, index, text, why in cov["failures"]:
        print(f"  UNPARSED row {rid} constraint {index}: {text!r}: {why}")
    return 1 if cov["failures"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
