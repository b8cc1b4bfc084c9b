"""What the openrlhf backend refuses before a run starts, and what a machine needs to train with it.

Settings it would ignore (pre-flight, ``OpenRLHFBackend.ignored``): the run-config fields the
backend does not declare in ``honours``, with the reason of :data:`NOT_HONOURED`, and the dtypes
OpenRLHF 0.11 cannot run (:func:`dtype_refusals`: a float32 update, vLLM engines in anything but
bf16).

Refused, with the reason (pre-flight, :func:`refusal`):

- an algorithm with its own loss term (OPSD's distillation): OpenRLHF's actor loss would have to
  change, which this backend does not patch;
- replaying algorithms (MRTPO and its family, CoRT) with ZeRO-3, DeepSpeed tensor parallelism or
  ring attention: the replay runs a data-dependent number of forward passes on each actor, which
  ZeRO-3's lock-step parameter gathering and the sharded attention layouts cannot follow;
- replaying algorithms with asynchronous rollouts: the replay must see the policy that sampled;
- an in-memory model (``tiny-*``): OpenRLHF's processes load weights from a path or hub id;
- prompts plus responses longer than the model's positions (``sampling.max_prompt_tokens +
  max_new_tokens``, OpenRLHF's ``data.max_len`` and vLLM's ``max_model_len``, over the
  ``max_position_embeddings`` of the model's ``config.json``, read from its directory or the hub
  cache): vLLM would refuse the engine, and the policy actor would then wait for it;
- batch shapes OpenRLHF cannot split: a step's samples over ``mini_batches``, an update over
  micro-batches on every data-parallel actor, colocated actors and engines of different counts;
- ``extra_args`` that set a flag the backend writes itself, or one that shapes OpenRLHF's scalar
  reward (dynamic filtering, length penalties, reward normalisation or clipping) or its
  importance-sampling correction: mrbench's advantages come from the K rewards.

Needed to train (:func:`missing`): the ``openrlhf``, ``ray``, ``vllm`` and ``deepspeed`` packages
(only ``ray`` when the run is submitted as a Ray job) and, unless the run joins a Ray cluster,
a CUDA GPU. ``pip install 'mrbench[openrlhf]'``
installs the tested OpenRLHF release with its pinned dependencies (CUDA nodes only: flash-attn has
no CPU build).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from harness.backends.openrlhf.argv import (
    owned_extra_flags,
    scalar_reward_flags,
    submits_job,
    topology,
    train_batch_size,
    update_flags,
)
from harness.models import TINY_PREFIX
from mrbench_core.replay_kinds import WITHOUT_FORWARD, ReplayRequest

INSTALL_HINT = "pip install 'mrbench[openrlhf]' (OpenRLHF 0.11 with its pinned Ray, vLLM, DeepSpeed, flash-attn)"
REQUIRED_PACKAGES = ("openrlhf", "ray", "vllm", "deepspeed")


def replays(algorithm: Any) -> bool:
    """Whether the algorithm runs forward passes on the policy actors (mrtpo-oracle's read-span
    masks are built from the verdicts on the driver: no replay pass)."""
    kind = ReplayRequest(algorithm.replay_request)
    return kind is not ReplayRequest.NONE and kind not in WITHOUT_FORWARD


#: rope scalings whose ``max_position_embeddings`` already counts the scaled positions (vLLM does not
#: multiply them by the factor)
_SCALED_POSITIONS = {"llama3", "longrope", "su", "default", "mrope"}


def model_positions(source: str) -> tuple[int, str] | None:
    """The positions a model takes (``max_position_embeddings``, times a rope scaling factor where
    vLLM applies one) and the config file they come from: a local directory's, or the hub cache's
    (nothing is downloaded before a run); None where neither has it."""
    path = Path(source) / "config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(source, "config.json")
        except Exception:  # not a hub id, or no hub client: unknown
            return None
        if not isinstance(cached, str):
            return None
        path = Path(cached)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for node in (data, data.get("text_config") or {}):
        positions = node.get("max_position_embeddings") if isinstance(node, dict) else None
        if isinstance(positions, int) and positions > 0:
            scaling = node.get("rope_scaling") or {}
            kind = scaling.get("rope_type", scaling.get("type")) if isinstance(scaling, dict) else None
            factor = scaling.get("factor", 1.0) if isinstance(scaling, dict) else 1.0
            if kind and kind not in _SCALED_POSITIONS and isinstance(factor, (int, float)) and factor > 1:
                positions = int(positions * factor)
            return positions, str(path)
    return None


def length_refusal(cfg: Any) -> str | None:
    """Why ``data.max_len`` (prompt + response tokens) cannot run on this model, else None."""
    from harness.backends.openrlhf.prompts import model_source

    found = model_positions(model_source(cfg, convert=False))
    s = cfg.sampling
    total = s.max_prompt_tokens + s.max_new_tokens
    if found is None or total <= found[0]:
        return None
    positions, where = found
    fits = positions - s.max_new_tokens
    return (f"sampling.max_prompt_tokens {s.max_prompt_tokens} + sampling.max_new_tokens {s.max_new_tokens} = "
            f"{total} tokens (OpenRLHF's data.max_len, vLLM's max_model_len) exceeds the model's "
            f"{positions} positions (max_position_embeddings in {where}); vLLM would refuse the engine: "
            + (f"set --sampling.max_prompt_tokens {fits} or lower" if fits > 0 else
               f"lower --sampling.max_new_tokens below {positions}"))


#: why the openrlhf backend does not honour a run-config field (or section) it leaves out of its
#: ``honours``: pre-flight names the reason with the refused setting
NOT_HONOURED = {
    "model.device": "OpenRLHF's actors and vLLM engines go where Ray places them (backend.openrlhf.*)",
    "output.save_merged": "the openrlhf backend copies OpenRLHF's saved model or LoRA adapter, unmerged",
    "schedule.stop_without_signal": "it stops the local backend's loop; OpenRLHF's trainer runs its planned steps "
                                    "(the no-signal warning and summary come at the end of the run)",
    "backend.local": "the local backend's own sampling and replay options; the policy actors replay as the replay.* "
                     "section says",
    "backend.options": "a plugin backend's options",
}


def reason(path: str) -> str:
    """Why the openrlhf backend does not honour ``path`` (empty when :data:`NOT_HONOURED` does not say)."""
    for entry, why in NOT_HONOURED.items():
        if path == entry or path.startswith(entry + "."):
            return why
    return ""


def dtype_refusals(cfg: Any) -> list[str]:
    """``model.train_dtype`` and ``model.dtype`` values OpenRLHF 0.11 cannot run, each
    ``path=value (why)`` (``auto`` resolved on the GPUs the run would use: :func:`argv.precision`)."""
    from harness.backends.openrlhf.argv import VLLM_DTYPE, precision

    m, resolved = cfg.model, precision(cfg)
    out = []
    if resolved.param_dtype is None:
        auto = f"auto resolves to {resolved.train_dtype}: {resolved.why}; " if m.train_dtype == "auto" else ""
        out.append(f"model.train_dtype={m.train_dtype} ({auto}OpenRLHF 0.11 trains in bf16 or fp16 only, "
                   f"--ds.param_dtype; bfloat16 is DeepSpeed's bf16 with float32 master weights)")
    if resolved.rollout_dtype != VLLM_DTYPE:
        auto = f"auto resolves to {resolved.rollout_dtype}: {resolved.why}; " if m.dtype == "auto" else ""
        out.append(f"model.dtype={m.dtype} ({auto}OpenRLHF 0.11's vLLM engines sample in {VLLM_DTYPE})")
    return out


def batch_fits(prompts: int, group: int, mini_batches: int, micro: int, actors: int) -> str:
    """The nearest settings whose updates split into micro-batches on every actor: more prompts per
    step, or a smaller micro-batch."""
    def fits(p: int, m: int) -> bool:
        return (p * group) % mini_batches == 0 and ((p * group) // mini_batches) % (m * actors) == 0

    options = []
    more = next((p for p in range(prompts + 1, prompts * micro * actors * mini_batches + 2) if fits(p, micro)), None)
    if more is not None:
        per_actor = more * group // mini_batches // actors
        options.append(f"--sampling.prompts_per_step {more} ({more * group // mini_batches} samples per update, "
                       f"{per_actor} per actor: {per_actor // micro} micro-batch(es) of {micro})")
    smaller = next((m for m in range(micro - 1, 0, -1) if fits(prompts, m)), None)
    if smaller is not None:
        options.append(f"--optim.micro_batch_size {smaller}")
    return "set " + ", or ".join(options) if options else "give each actor at least one micro-batch"


def refusal(cfg: Any, algorithm: Any) -> str | None:
    """Why the run cannot start with these settings (see the module docstring), else None."""
    opts, s, o = cfg.backend.openrlhf, cfg.sampling, cfg.optim
    if cfg.model.name.startswith(TINY_PREFIX):
        return (f"model {cfg.model.name!r} exists only in memory; OpenRLHF's actors and vLLM engines load "
                f"weights from a local directory or hub id")
    too_long = length_refusal(cfg)
    if too_long:
        return too_long
    if opts.nodes > 1 and not opts.address:
        return (f"backend.openrlhf.nodes={opts.nodes} needs a running Ray cluster: start one (ray start) and set "
                f"backend.openrlhf.address")
    if opts.zero_stage not in (0, 1, 2, 3):
        return f"backend.openrlhf.zero_stage must be 0, 1, 2 or 3, got {opts.zero_stage}"
    if replays(algorithm):
        kind = ReplayRequest(algorithm.replay_request).value
        why = {"zero_stage": opts.zero_stage == 3, "tensor_parallel": opts.tensor_parallel > 1,
               "ring_attn_size": opts.ring_attn_size > 1}
        for name, bad in why.items():
            if bad:
                return (f"{algorithm.name} replays ({kind}) on the policy actors, a data-dependent number of "
                        f"forward passes per actor that backend.openrlhf.{name}={getattr(opts, name)} cannot "
                        f"follow (it shards parameters or attention across actors in lock-step); use "
                        f"zero_stage <= 2, tensor_parallel 1 and ring_attn_size 1")
        if opts.async_rollouts:
            return (f"{algorithm.name} replays ({kind}) with the policy that sampled; with "
                    f"backend.openrlhf.async_rollouts the actors have moved on by the time the batch arrives")
    top = topology(opts)
    samples = s.prompts_per_step * s.group_size
    if samples % max(1, o.mini_batches):
        return (f"optim.mini_batches={o.mini_batches} must divide the {samples} samples of a step "
                f"(sampling.prompts_per_step x group_size)")
    per_update = train_batch_size(cfg)
    if per_update % (o.micro_batch_size * top.data_parallel):
        return (f"each update's {per_update} samples must split into micro-batches of optim.micro_batch_size="
                f"{o.micro_batch_size} on each of the {top.data_parallel} data-parallel policy actor(s); "
                + batch_fits(s.prompts_per_step, s.group_size, o.mini_batches, o.micro_batch_size, top.data_parallel))
    if opts.colocate and not opts.async_rollouts and top.actors != top.engines * top.engine_tp:
        return (f"backend.openrlhf.colocate puts one vLLM GPU on each policy actor's GPU: {top.actors} actor GPU(s) "
                f"but {top.engines} engine(s) x {top.engine_tp} GPU(s); set vllm_engines to "
                f"{top.actors // top.engine_tp} or colocate false")
    owned = owned_extra_flags(opts.extra_args)
    if owned:
        return (f"backend.openrlhf.extra_args sets {', '.join(owned)}, which the backend writes from the run "
                f"config (mrbench run --help names the field)")
    scalar = scalar_reward_flags(opts.extra_args)
    if scalar:
        return (f"backend.openrlhf.extra_args sets {', '.join(scalar)}, which shapes, filters or corrects "
                f"OpenRLHF's scalar reward or log-probabilities; mrbench's algorithm computes the advantages "
                f"from the K rewards, so it would have no effect or a wrong one")
    update = update_flags(opts.extra_args)
    if update:
        return (f"backend.openrlhf.extra_args sets {', '.join(update)}, which changes OpenRLHF's policy loss; "
                f"the policy actors run mrbench's objective (harness.backends.loss.PolicyObjective), the local "
                f"backend's, so that both backends make the same update")
    return unpicklable_task(cfg)


def unpicklable_task(cfg: Any) -> str | None:
    """The agent scores in vLLM's worker threads, where the verifier budget holds only by scoring
    on a copy of the task in a worker process (:meth:`tasks.base.Task.score_within`): a task that
    does not pickle would be scored there without any budget, so it is refused here."""
    if not cfg.task.verifier_timeout_s:
        return None
    import pickle

    from tasks.registry import make_task

    try:
        pickle.dumps(make_task(cfg.task.name, **cfg.task.options))
    except Exception as exc:  # noqa: BLE001  (whatever pickling raises, said in one line)
        return (f"task {cfg.task.name!r} does not pickle ({type(exc).__name__}: {exc}), and on openrlhf the "
                f"verifier time budget scores on a copy of the task in a worker process; make it picklable "
                f"or set --task.verifier_timeout_s 0 (no budget)")
    return None


def _absent(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def missing(cfg: Any) -> str | None:
    """What this machine lacks to train (see the module docstring), with how to install it."""
    address = cfg.backend.openrlhf.address or ""
    # a Ray job runs on the cluster: only the `ray` client is needed here
    lacking = [name for name in (("ray",) if submits_job(cfg) else REQUIRED_PACKAGES) if _absent(name)]
    parts = []
    if lacking:
        parts.append(f"missing Python package(s) {', '.join(lacking)}: {INSTALL_HINT}")
    if not address:
        import torch

        if not torch.cuda.is_available():
            parts.append("no CUDA GPU on this machine (OpenRLHF trains with DeepSpeed and samples with vLLM on "
                         "GPUs); run on a GPU node, or join a Ray cluster with GPUs through "
                         "--backend.openrlhf.address")
    if not parts:
        return None
    return "cannot train here: " + "; ".join(parts) + " (mrbench run --dry-run prints the launch without them)"
