"""The base-model cells of a grid that says ``base: true``.

One cell per distinct base identity among the grid's cells (:func:`harness.base_model.base_identity`:
task, model, benchmarks and their settings), so a grid of 3 algorithms x 4 seeds on one task and
model gets one. Its record directory is ``ROOT/<task>/base/<model-slug>/eval-<hash>``; it runs as
``mrbench run --config <record>/cell.yaml --base-model`` with the configuration of the first cell
that shares its identity (the evaluation reads only the identity's fields), through the same
executors as the training cells, before them. Finished, it is never rerun.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from harness.base_model import base_identity, base_record_dir, digest

if TYPE_CHECKING:  # grid imports this module: the Cell class comes with the cells
    from harness.sweep.grid import Cell


def base_cells(root: str, cells: list[Cell]) -> list[Cell]:
    out: dict[str, Cell] = {}
    for cell in cells:
        config = cell.cfg.to_dict()
        key = digest(base_identity(config))
        if key in out:
            continue
        path = base_record_dir(root, config)
        cfg = replace(cell.cfg, output=replace(cell.cfg.output, dir=str(path)))
        rel = path.relative_to(root).as_posix()
        values = {"task.name": cell.cfg.task.name, "model.name": cell.cfg.model.name}
        out[key] = replace(cell, id=rel, values=values, overrides=dict(cell.overrides), cfg=cfg, kind="base")
    return list(out.values())
