"""Give committed records that predate the numerics block one, computed afterwards at each record's
own commit, and store the blocks beside the records (records are immutable).

    .venv/bin/python scripts/numerics_afterwards.py results/reference/NAME [...]

For every commit the records under a root name (``provenance.json``'s ``git.commit``), a temporary
git worktree at that commit (outside the repository, removed afterwards) runs this checkout's
``harness/numerics_probe.py``, unchanged, against that commit's code (its ``digests`` called with
that commit's ``LocalBackend``), on this machine and in this Python environment. Each record's block (:mod:`harness.numerics`) gets the fingerprint of its
commit, ``"fingerprint_source": "computed-afterwards"``, the commit, dirty flag, versions, dtypes and
kernels its own provenance names, and this machine's device class (the records' provenance names no
CPU model); ``computed`` says where and with which library versions it was computed. A record's
block has no fingerprint (null) when its commit is not in the repository, or when the probe does not
run there (``unknown_because`` says which). The blocks go to ``ROOT/numerics.json`` under
``records``, keyed by each record's path below ROOT, which :func:`harness.numerics.record_numerics`
reads.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.fingerprint import library_versions  # this checkout's (the path above)
from harness.numerics import SIDECAR, SOURCE_AFTERWARDS, device_class, device_info, fingerprint_of, from_provenance
from harness.numerics_probe import PROBE_VERSION

PROBE = REPO / "harness" / "numerics_probe.py"
#: run in the worktree: its own harness must be the one imported; then this checkout's probe steps
#: through that harness's local backend, and the last line printed holds the digests
CHILD = ("import json, pathlib, runpy; import harness; "
         "here = pathlib.Path.cwd().resolve(); assert pathlib.Path(harness.__file__).resolve().is_relative_to(here), "
         "harness.__file__; from harness.backends.local import LocalBackend; probe = runpy.run_path({probe!r}); "
         "print(json.dumps({{'probe_version': probe['PROBE_VERSION'], 'digests': probe['digests']('cpu', LocalBackend)}}, "
         "sort_keys=True))")


def records(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("provenance.json") if (p.parent / "config.json").exists())


def probe_at(commit: str) -> tuple[dict[str, str] | None, str]:
    """(the probe's digests at ``commit``, or None; why not)."""
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True,
                           check=False)
    if known.returncode != 0:
        return None, f"commit {commit[:7]} is not in this repository's history"
    with tempfile.TemporaryDirectory(prefix="mrbench-numerics-") as tmp:
        tree = Path(tmp) / commit[:12]
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=REPO, check=True,
                       capture_output=True)
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MRBENCH_NUMERICS")}
            env["PYTHONPATH"] = str(tree)
            done = subprocess.run([sys.executable, "-c", CHILD.format(probe=str(PROBE))], cwd=tree, env=env,
                                  capture_output=True, text=True, check=False)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True,
                           check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"the probe does not run at {commit[:7]}: {last}"
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found["digests"], ""


def block_for(prov: dict[str, Any], digests: dict[str, str] | None, why: str, here: dict[str, Any]) -> dict[str, Any]:
    block = from_provenance(prov)
    rollout = prov.get("rollout") or {}
    block.update(fingerprint=fingerprint_of(digests) if digests else None, fingerprint_source=SOURCE_AFTERWARDS,
                 device_class=here["device_class"], device=here["device"],
                 kernels={k: rollout[k] for k in ("attention", "replay_batching", "threads") if k in rollout}
                 | ({"generator": prov["generator"]} if prov.get("generator") else {}),
                 computed=here["computed"])
    if digests:
        block["fingerprint_parts"] = digests
    else:
        block["unknown_because"] = why
    if prov.get("git", {}).get("dirty"):
        block["note"] = "the record's tree had uncommitted changes; the probe ran at the clean commit"
    return block


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: " + __doc__.strip().splitlines()[3].strip(), file=sys.stderr)  # the line after the summary
        return 2
    info = device_info("cpu")
    here = {"device_class": device_class(info), "device": info,
            "computed": {"date": datetime.date.today().isoformat(), "device_class": device_class(info),
                         "versions": library_versions(), "probe_version": PROBE_VERSION,
                         "by": "scripts/numerics_afterwards.py"}}
    for root in map(Path, argv):
        found: dict[str, tuple[dict[str, str] | None, str]] = {}
        blocks = {}
        for record in records(root):
            prov = json.loads((record / "provenance.json").read_text(encoding="utf-8"))
            commit = (prov.get("git") or {}).get("commit")
            if commit and commit not in found:
                print(f"{root}: probing commit {commit[:7]} ...", file=sys.stderr, flush=True)
                found[commit] = probe_at(commit)
            digests, why = found.get(commit, (None, "the record names no commit"))
            blocks[record.relative_to(root).as_posix()] = block_for(prov, digests, why, here)
        (root / SIDECAR).write_text(json.dumps({"records": blocks}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for commit, (digests, why) in found.items():
            print(f"{root}: {commit[:7]}: " + (fingerprint_of(digests) if digests else f"unknown ({why})"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
