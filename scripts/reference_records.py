"""Copy a sweep's finished records with what a committed reference keeps.

    .venv/bin/python scripts/reference_records.py SWEEP_ROOT DEST

DEST gets the sweep's ``sweep.json`` and ``adaptive.json`` (where it has one) and, for every record
whose ``provenance.json`` says finished, its ``config.json``, ``metrics.jsonl``, ``eval.json`` and
``provenance.json`` less the machine's name (``host``) and the model's local path
(``model_source``). Samples, credit rows, logs, locks and checkpoints stay behind, and so do records
that did not finish: a sweep resumed on DEST's copy runs those cells again. This is how the
reference comparisons under ``results/reference/`` were kept, and how an adaptive sweep too long for
one machine's lease is carried to the next one (``results/in-progress/``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

KEPT = ("config.json", "metrics.jsonl", "eval.json")
STATE = ("sweep.json", "adaptive.json")
MACHINE_KEYS = ("host", "model_source")


def keep_records(src: Path, dst: Path) -> tuple[int, int]:
    """(records kept, records left out as unfinished)."""
    if not (src / "sweep.json").exists():
        raise SystemExit(f"{src}: no sweep.json; give a sweep's root")
    dst.mkdir(parents=True, exist_ok=True)
    for name in STATE:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)
    kept = left = 0
    for prov_path in sorted(src.rglob("provenance.json")):
        prov = json.loads(prov_path.read_text())
        if prov.get("status") != "finished":
            left += 1
            continue
        out = dst / prov_path.parent.relative_to(src)
        out.mkdir(parents=True, exist_ok=True)
        for key in MACHINE_KEYS:
            prov.pop(key, None)
        (out / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")
        for name in KEPT:
            if (prov_path.parent / name).exists():
                shutil.copy2(prov_path.parent / name, out / name)
        kept += 1
    return kept, left


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    kept, left = keep_records(Path(argv[0]), Path(argv[1]))
    print(f"kept {kept} finished records in {argv[1]}; left out {left} unfinished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
