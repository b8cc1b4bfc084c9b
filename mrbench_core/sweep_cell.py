"""How a process knows it is a sweep cell: the sweep sets :data:`CELL_ENV` in every cell's
environment (``harness.sweep.cellproc``), and the training backends read it
(``harness.training.stop_signal``: a cell ignores repeated stop signals). Standard library only."""

from __future__ import annotations

import os

#: in a cell's environment: the process is a sweep cell
CELL_ENV = "MRBENCH_SWEEP_CELL"


def is_sweep_cell() -> bool:
    """Whether this process runs as a sweep cell (``CELL_ENV`` set, and not to ``0``)."""
    return os.environ.get(CELL_ENV, "") not in ("", "0")
