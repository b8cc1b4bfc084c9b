"""Which test ids one collection has that another lacks: the check that a change to the suite kept
every test (or says where each one went).

    .venv/bin/python -m pytest -q --collect-only -m "not slow" -p no:cacheprovider > before.txt
    ... change the suite ...
    .venv/bin/python -m pytest -q --collect-only -m "not slow" -p no:cacheprovider > after.txt
    python scripts/compare_test_ids.py before.txt after.txt

Each file is pytest's ``--collect-only -q`` output; only its id lines count, and
pytest-xdist's ``@group`` suffix is dropped. Prints the ids only in the first (gone), only in the
second (new) and the counts; exits 1 when an id is gone.
"""

from __future__ import annotations

import sys
from pathlib import Path


def test_ids(path: Path) -> set[str]:
    ids = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if "::" not in line or line[:1].isspace() or line.startswith(("=", "-")):
            continue  # not an id: the summary, a warning's text
        ids.add(line.rsplit("@", 1)[0] if line.rfind("@") > line.rfind("]") else line)
    return ids


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: python scripts/compare_test_ids.py BEFORE.txt AFTER.txt", file=sys.stderr)
        return 2
    before, after = (test_ids(Path(a)) for a in argv)
    gone, new = sorted(before - after), sorted(after - before)
    for title, ids in (("gone", gone), ("new", new)):
        print(f"{title} ({len(ids)}):")
        for test_id in ids:
            print(f"  {test_id}")
    print(f"before {len(before)}, after {len(after)}, kept {len(before & after)}")
    return 1 if gone else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
