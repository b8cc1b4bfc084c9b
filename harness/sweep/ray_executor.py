"""The ``ray`` executor: each cell is a Ray task that runs the cell as a subprocess.

``ray.init(address=...)`` joins a cluster (``--address``; ``auto`` or ``RAY_ADDRESS`` for a
running one); without an address a local Ray instance starts and is shut down at the end. When
Ray is already initialised in this process (tests, notebooks) it is used as it is.

Resources per cell: ``num_cpus`` = the grid's ``resources.cpus``, else the cell's
``backend.local.threads``, else 1 (and the cell then runs with that many threads); ``num_gpus`` =
``resources.gpus``, else 1 when the cell uses CUDA (``model.device`` cuda, or auto on a cluster
with GPUs), else 0; Ray sets the task's ``CUDA_VISIBLE_DEVICES``, which the cell inherits. A cell
whose backend reserves its own GPUs (``Backend.reserved_gpus``) runs as a 1-CPU task without
GPUs, and starts only while the cluster has its GPUs to spare, so that two such cells never wait
on each other's half-reserved groups.

The cell's working directory is the sweep's: on a cluster of several nodes, the working
directory and the grid's root must be on storage every node sees at the same path.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from typing import Any

from harness.sweep import cellproc
from harness.sweep.executors import Events, child_env, uses_cuda, with_threads, write_cell_files
from harness.sweep.grid import Cell
from harness.sweep.status import FAILED

WAIT_S = 1.0
CANCEL_GRACE_S = 150.0


class RayUnavailable(ImportError):
    pass


def import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable("the ray executor needs Ray: pip install 'mrbench[ray]' "
                             "(bash scripts/setup.sh --dev installs it)") from exc
    return ray


@dataclass(frozen=True)
class CellResources:
    cpus: int
    gpus: float
    reserved_gpus: int  # GPUs the cell's backend reserves itself (admission budget)


def cell_resources(cell: Cell, cluster_gpus: float) -> CellResources:
    from harness.backends import BACKENDS

    cfg = cell.cfg
    reserved = int(BACKENDS.get(cfg.backend.name).reserved_gpus(cfg))
    if reserved > 0:
        return CellResources(cpus=1, gpus=0, reserved_gpus=reserved)
    threads = cfg.backend.local.threads if cfg.backend.name == "local" else 0
    cpus = cell.resources.cpus or threads or 1
    gpus = cell.resources.gpus
    if gpus is None:
        gpus = 1 if uses_cuda(cell, cluster_gpus > 0) else 0
    return CellResources(cpus=int(cpus), gpus=float(gpus), reserved_gpus=0)


@dataclass
class RayExecutor:
    address: str | None = None
    jobs: int | None = None  # most cells in flight at once (None: Ray's resources decide)
    retries: int = 0
    name: str = "ray"

    def run(self, cells: list[Cell], events: Events) -> None:
        ray = import_ray()
        started_here = not ray.is_initialized()
        if started_here:
            if self.address:  # a cluster (or Ray Client) address is joined as it is
                ray.init(address=self.address)
            else:  # a new local instance (or RAY_ADDRESS's cluster); no dashboard needed
                ray.init(include_dashboard=False)
        try:
            self._run(ray, cells, events)
        finally:
            if started_here:
                ray.shutdown()

    def _run(self, ray: Any, cells: list[Cell], events: Events) -> None:
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(cellproc)  # workers need not import mrbench
        remote = ray.remote(cellproc.run_cell_process)
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0))
        queue = deque((cell, 0) for cell in cells)
        inflight: dict[Any, tuple[Cell, int, CellResources]] = {}
        cwd = os.getcwd()
        limit = self.jobs or len(cells)
        try:
            while queue or inflight:
                held = sum(r.reserved_gpus for _, _, r in inflight.values())
                for _ in range(len(queue)):
                    if len(inflight) >= limit:
                        break
                    cell, tries = queue.popleft()
                    res = cell_resources(cell, cluster_gpus)
                    if res.reserved_gpus and held + res.reserved_gpus > cluster_gpus:
                        if not inflight:
                            raise RuntimeError(f"{cell.id}: its backend reserves {res.reserved_gpus} GPUs; the "
                                               f"cluster has {cluster_gpus:g}")
                        queue.append((cell, tries))  # wait for GPUs to free up
                        continue
                    held += res.reserved_gpus
                    cfg = with_threads(cell, res.cpus)
                    cell_yaml, log = write_cell_files(cell, cfg)
                    extra = child_env({"OMP_NUM_THREADS": str(res.cpus)})
                    events.started(cell)
                    ref = remote.options(num_cpus=res.cpus, num_gpus=res.gpus, max_retries=0,
                                         name=f"mrbench:{cell.id}").remote(cell_yaml, log, cwd, extra,
                                                                                           cell.run_args)
                    inflight[ref] = (cell, tries, res)
                if not inflight:
                    continue
                done, _ = ray.wait(list(inflight), num_returns=1, timeout=WAIT_S)
                for ref in done:
                    cell, tries, _ = inflight.pop(ref)
                    try:
                        code = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001  (the task itself failed: worker died, ...)
                        print(f"mrbench sweep: {cell.id}: Ray task failed: {exc}")
                        code = None
                    if events.ended(cell, code) == FAILED and tries < self.retries:
                        queue.append((cell, tries + 1))
        except BaseException:
            for ref in inflight:  # KeyboardInterrupt in each task: SIGTERM to its cell, which checkpoints
                ray.cancel(ref, force=False)
            if inflight:
                ray.wait(list(inflight), num_returns=len(inflight), timeout=CANCEL_GRACE_S)
            for cell, _, _ in inflight.values():
                events.ended(cell, None)
            raise
