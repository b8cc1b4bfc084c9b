"""``python -m harness.backends.openrlhf.main FLAGS...``: OpenRLHF's ``train_ppo_ray`` with mrbench's hooks.

It joins (or starts) Ray with a runtime environment that lets every OpenRLHF process import
mrbench and find the cell (``$MRBENCH_CELL``, ``$PYTHONPATH``, plus the variables OpenRLHF sets
itself when it starts Ray), installs mrbench's policy actor and trainer (:func:`.trainer.install`)
and runs OpenRLHF's command-line module as ``__main__``, so that its own argument parser and
checks judge the flags. ``mrbench run --backend openrlhf`` starts it; nothing else should.

Before OpenRLHF starts, the Ray cluster must hold the GPUs the run's placement asks for
(:func:`.failures.gpu_shortfall`). When the run fails, the last line of its output is the cause,
as one line (:data:`.failures.CAUSE_PREFIX`), which the backend reads back from the log.
"""

from __future__ import annotations

import os
import runpy
import sys

from harness.backends.openrlhf.cell import CELL_ENV

OPENRLHF_CLI = "openrlhf.cli.train_ppo_ray"
#: what OpenRLHF's ``train`` passes to ``ray.init`` when it starts Ray itself (defaults; the
#: environment wins)
OPENRLHF_RAY_ENV = {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN", "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": "1"}
FORWARDED = (CELL_ENV, "PYTHONPATH", "MRBENCH_DATA_DIR", "MRBENCH_MODEL_CACHE", "HF_HOME", "HF_HUB_OFFLINE")


def ray_env() -> dict[str, str]:
    env = {k: os.environ.get(k, v) for k, v in OPENRLHF_RAY_ENV.items()}
    env.update({k: os.environ[k] for k in FORWARDED if k in os.environ})
    return env


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not os.environ.get(CELL_ENV):
        sys.exit(f"{__name__}: ${CELL_ENV} is not set; start runs with `mrbench run --backend openrlhf`")
    import ray

    from harness.backends.openrlhf.trainer import install

    from harness.backends.openrlhf.cell import current_cell
    from harness.backends.openrlhf.failures import CAUSE_PREFIX, gpu_shortfall, one_line

    try:
        if not ray.is_initialized():
            ray.init(address=os.environ.get("RAY_ADDRESS") or None, runtime_env={"env_vars": ray_env()})
        short = gpu_shortfall(current_cell().cfg, ray.cluster_resources())
        if short:
            raise RuntimeError(short)
        install()
        sys.argv = [OPENRLHF_CLI, *argv]
        runpy.run_module(OPENRLHF_CLI, run_name="__main__", alter_sys=True)
    except Exception as exc:
        import traceback

        traceback.print_exc()
        print(CAUSE_PREFIX + one_line(exc), flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
