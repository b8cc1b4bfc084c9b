"""``mrbench sweep GRID --dry-run``'s expected time: the cells that would run, each estimated as
``mrbench run --dry-run`` estimates one (:func:`harness.dry_run_estimate.estimate_cell`, from a
speed probe run once per thread count and precision), summed as if they ran one at a time.

Finished cells and cells another process runs cost nothing; an interrupted cell costs the steps
after its checkpoint; a base-model cell costs its evaluation. Cells of another backend than the
local one, on a GPU, or of a model whose size mrbench does not know, are counted apart (no estimate).
"""

from __future__ import annotations

import json
from typing import Any

from evals.generate_cases import duration
from harness.sweep.status import FINISHED, INTERRUPTED, RUNNING, cell_state


def sweep_estimate(cells: list[Any], jobs: int | None = None, measure: Any = None) -> str:
    """One line: the expected time of the cells that would run, with what was measured for it."""
    from algorithms.catalog import get_algorithm
    from harness.dry_run_estimate import estimate_cell, measure_speed
    from harness.preflight import preflight
    from harness.run_plan import benchmark_sizes

    probes: dict[tuple[int, frozenset[str]], Any] = {}

    def probe(threads: int, dtypes: set[str]) -> Any:
        key = (threads, frozenset(dtypes))
        if key not in probes:
            probes[key] = (measure or measure_speed)(threads, dtypes)
        return probes[key]

    sizes: dict[str, dict[str, tuple[int, int]]] = {}
    seconds, counted, unknown = 0.0, 0, []
    for cell in cells:
        state = cell_state(cell)
        if state.state in (FINISHED, RUNNING):
            continue
        cfg = cell.cfg
        if cfg.backend.name != "local" or (cfg.model.device != "cpu" and _cuda()):  # the probe is the CPU's
            unknown.append(cell.id)
            continue
        key = json.dumps({k: v for k, v in cfg.to_dict().items() if k not in ("seed", "output")}, sort_keys=True,
                         default=str)
        if key not in sizes:
            s = cfg.schedule
            sizes[key] = benchmark_sizes(preflight(cfg, environment=False).benchmarks, s.eval_limit,
                                         s.eval_max_new_tokens)
        done = cfg.schedule.steps if getattr(cell, "kind", "train") == "base" else (
            state.steps if state.state == INTERRUPTED else 0)
        found = estimate_cell(cfg, get_algorithm(cfg.algo.name, **cfg.algo.params), done, sizes[key], probe)
        if found is None:
            unknown.append(cell.id)
            continue
        seconds += found[0].training + found[0].evaluation
        counted += 1
    if not counted and not unknown:
        return "expected time: none: every cell has finished or runs elsewhere"
    parts = []
    if counted:
        at_once = f"; --jobs {jobs} runs {jobs} at a time on the same cores" if jobs and jobs > 1 else ""
        parts.append(f"expected time: about {duration(seconds)} for the {counted} cell(s) to run, one at a time, "
                     f"at this machine's present speed ({next(iter(probes.values())).describe()}){at_once}")
    if unknown:
        parts.append(f"no estimate for {len(unknown)} cell(s) (another backend, a GPU, or a model of unknown size; "
                     f"first: {unknown[0]})")
    return "; ".join(parts)


def _cuda() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()
