"""Bounded waits and one-line causes for the pieces of an OpenRLHF run that may not come up.

- :func:`wait_for_engines`: the policy actors wait for the vLLM engines before OpenRLHF builds the
  weight-sync group with them (an engine that failed to start would otherwise leave rank 0 in
  that group's rendezvous until its store timeout, with no word of the cause); a dead engine
  ends the wait at once with its error, a silent one after :data:`ENGINE_START_TIMEOUT_S`;
- :func:`gpu_shortfall`: the Ray cluster must hold the GPUs the placement asks for (OpenRLHF's
  placement groups would wait for ever);
- :func:`one_line` and :data:`CAUSE_PREFIX`: the entry point prints the cause of a failed run as
  one line of the log, which the backend reads back (:func:`cause_in_log`) into its error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

#: how long the policy actors wait for the vLLM engines to come up (seconds; large models take minutes)
ENGINE_START_TIMEOUT_S = float(os.environ.get("MRBENCH_OPENRLHF_ENGINE_TIMEOUT_S", "1800"))
CAUSE_PREFIX = "mrbench openrlhf: the run ended: "
MAX_CAUSE_CHARS = 400
_NOT_DETAIL = ("File ", "Traceback", "The above", "During handling", "For further information")
_ERROR_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt))(: .*)?$")


class EngineStartError(RuntimeError):
    """A vLLM engine did not come up."""


def one_line(exc: BaseException) -> str:
    """The innermost cause of ``exc`` as one line (Ray wraps remote errors, with tracebacks)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "cause", None) or exc.__cause__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [i for i, line in enumerate(lines) if _ERROR_LINE.match(line)]
    at = errors[-1] if errors else len(lines) - 1
    line = lines[at] if lines else ""
    following = lines[at + 1] if 0 <= at < len(lines) - 1 else ""
    if errors and following and not following.startswith(_NOT_DETAIL):  # e.g. pydantic's "Value error, ..."
        line = f"{line}: {following}"
    if len(line) > MAX_CAUSE_CHARS:
        line = line[:MAX_CAUSE_CHARS - 3] + "..."
    name = type(exc).__name__
    return line if line.startswith(name) or errors else (f"{name}: {line}" if line else name)


def wait_for_engines(engines: list[Any] | None, timeout: float = ENGINE_START_TIMEOUT_S) -> None:
    """Return once every engine answers; raise :class:`EngineStartError` naming the first that
    died (with its error) or that did not answer within ``timeout`` seconds."""
    if not engines:
        return
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    for i, engine in enumerate(engines):
        try:
            ray.get(engine.get_num_unfinished_requests.remote(), timeout=timeout)
        except GetTimeoutError:
            raise EngineStartError(f"vLLM engine {i} did not come up within {timeout:g} s "
                                   f"(MRBENCH_OPENRLHF_ENGINE_TIMEOUT_S)") from None
        except RayActorError as exc:
            raise EngineStartError(f"vLLM engine {i} could not start: {one_line(exc)}") from None


def gpus_needed(cfg: Any) -> int:
    """The GPUs OpenRLHF's placement asks of the cluster for this run."""
    from harness.backends.openrlhf.argv import topology

    opts = cfg.backend.openrlhf
    top = topology(opts)
    if opts.colocate and not opts.async_rollouts:
        return top.actors
    reference = top.actors if cfg.optim.kl_coef > 0 else 0
    return top.actors + reference + top.engines * top.engine_tp


def gpu_shortfall(cfg: Any, cluster: dict[str, float]) -> str | None:
    """Why the cluster (``ray.cluster_resources()``) cannot place the run, else None."""
    have, need = float(cluster.get("GPU", 0.0)), gpus_needed(cfg)
    if have >= need:
        return None
    return (f"the Ray cluster has {have:g} GPU(s) and this run's placement needs {need} (mrbench run "
            f"--dry-run prints it); OpenRLHF's placement groups would wait for them for ever")


def cause_in_log(log: Path) -> str | None:
    """The cause the entry point printed, from the run's log."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    causes = [line.split(CAUSE_PREFIX, 1)[1].strip() for line in lines if CAUSE_PREFIX in line]
    return causes[-1] if causes else None
