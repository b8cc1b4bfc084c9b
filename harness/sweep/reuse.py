"""``mrbench sweep GRID --reuse-from DIR``: finished records of another root taken as this grid's cells.

A cell with no record yet whose path below DIR (``DIR/<cell id>``) holds a finished record of the
same configuration gets a copy of it: the same run, already done (a third reference comparison
starting from the second one's seeds). Same configuration means :func:`harness.records.same_configuration`
once the record's place (``output.dir``, ``output.root``) is left out; the copy's ``config.json``
names its new place, and nothing else in the record changes (its ``provenance.json`` still says
where and at which commit it ran). A record that differs in anything else is not copied, and the
first differing setting is named.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from harness.records import atomic_write_json, config_identity, read_json, same_configuration
from harness.sweep.status import FINISHED, PENDING, cell_state

PLACE = ("dir", "root")  # output fields that say where a record is, not what it computes


def _unplaced(config: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(config))
    for key in PLACE:
        out.get("output", {}).pop(key, None)
    return out


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}" if where else key)
    return f"{where or 'the config'}: {a!r} there, {b!r} here"


def matching(src: Path, cell: Any) -> tuple[bool, str]:
    """Whether ``src`` is a finished record of ``cell``'s configuration (its place aside), and why not."""
    try:
        prov = read_json(src / "provenance.json")
        theirs = read_json(src / "config.json")
    except Exception as exc:  # noqa: BLE001  (a missing or unreadable record is simply not reused)
        return False, str(exc)
    if prov.get("status") != "finished":
        return False, f"not finished ({prov.get('status')})"
    mine = cell.record_config()
    if same_configuration(_unplaced(theirs), _unplaced(mine)):
        return True, ""
    from harness.resolved import resolved_config

    a, b = (config_identity(resolved_config(_unplaced(c))) for c in (theirs, mine))  # defaults filled in
    return False, "another configuration: " + _first_difference(a, b)


def reuse_records(source: str | Path, cells: list[Any], dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Copy the matching finished records of ``source`` into the cells that have none (``dry_run``:
    only say which); returns the ids copied and a line for each record found there that does not match."""
    source = Path(source)
    if not source.is_dir():
        raise FileNotFoundError(f"--reuse-from {source}: no such directory")
    copied, refused = [], []
    for cell in cells:
        src = source / cell.id
        if not (src / "config.json").exists() or cell_state(cell).state != PENDING:
            continue
        ok, why = matching(src, cell)
        if not ok:
            refused.append(f"{src}: not reused: {why}")
            continue
        if dry_run:
            copied.append(cell.id)
            continue
        dest = Path(cell.record_dir)
        shutil.copytree(src, dest, dirs_exist_ok=True)
        config = read_json(src / "config.json")
        if isinstance(config.get("output"), dict):  # a base record's identity names no place
            config["output"].update(dir=str(dest), root=cell.cfg.output.root)
            atomic_write_json(dest / "config.json", config)
        if cell_state(cell).state != FINISHED:
            raise RuntimeError(f"{dest}: copied from {src} but not seen as finished")
        copied.append(cell.id)
    return copied, refused


def reuse_note(source: str | Path, copied: list[str], refused: list[str], dry_run: bool = False) -> str:
    verb = "would reuse" if dry_run else "reused"
    lines = [f"mrbench sweep: {verb} {len(copied)} finished records of {source} (the same configurations)"]
    return "\n".join(lines + refused)
