"""The OpenRLHF command line of a run (OpenRLHF 0.11's dotted flags), the command that launches it,
and where its actors and engines go.

OpenRLHF's own parser and checks (``python -m openrlhf.cli.train_ppo_ray``) stay authoritative:
mrbench only writes the flags, and the tests run that parser on them. The mapping, field by
field, is the table in docs/openrlhf.md. What the flags cannot say travels otherwise: the
algorithm is mrbench's (OpenRLHF's estimator flag is a placeholder that its group checks
accept), the rewards come from mrbench's agent executor, and top-k is set on the trainer.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from typing import Any

from harness.backends.openrlhf.cell import AGENT_FILE, CELL_ENV, REPO_ROOT, CellPaths
from harness.config import DTYPE_NAMES

ENTRYPOINT = "harness.backends.openrlhf.main"
#: the estimator named on the command line; mrbench's experience maker replaces its computation
PLACEHOLDER_ESTIMATOR = "group_norm"


@dataclass(frozen=True)
class Topology:
    nodes: int
    gpus_per_node: int
    engines: int
    engine_tp: int
    actor_tp: int
    ring: int

    @property
    def actors(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def data_parallel(self) -> int:
        """Policy actors that each take their own share of the data (OpenRLHF's effective actors)."""
        return max(1, self.actors // (self.actor_tp * self.ring))


def topology(opts: Any) -> Topology:
    engines = opts.vllm_engines
    if engines is None:
        engines = max(1, opts.nodes * opts.gpus_per_node // max(1, opts.vllm_tensor_parallel))
    return Topology(opts.nodes, opts.gpus_per_node, engines, opts.vllm_tensor_parallel, opts.tensor_parallel,
                    opts.ring_attn_size)


#: OpenRLHF 0.11's ``--ds.param_dtype`` for each ``model.train_dtype`` it can honour: DeepSpeed's
#: bf16 mode is the local backend's ``bfloat16`` (bf16 forward and backward, float32 master
#: weights and optimiser state); OpenRLHF takes bf16 or fp16 only, so float32 has none
PARAM_DTYPES = {"bfloat16": "bf16"}
#: the dtype OpenRLHF 0.11 gives its vLLM engines (``create_vllm_engines``: ``dtype="bfloat16"``)
VLLM_DTYPE = "bfloat16"


@dataclass(frozen=True)
class Precision:
    """What ``model.train_dtype`` and ``model.dtype`` become on OpenRLHF: each resolved name
    (``auto`` as the local backend resolves it, :func:`harness.models.resolve_train_dtype`, on the
    GPUs the run would use) and why, for the dry run and the record."""

    train_dtype: str
    rollout_dtype: str
    why: str

    @property
    def param_dtype(self) -> str | None:
        """``--ds.param_dtype``, None when OpenRLHF cannot train in ``train_dtype``."""
        return PARAM_DTYPES.get(self.train_dtype)

    def lines(self, cfg: Any) -> list[str]:
        """How the dry run and the record say it."""
        m = cfg.model
        update = (f"update: model.train_dtype {m.train_dtype} -> {self.train_dtype}: --ds.param_dtype "
                  f"{self.param_dtype} (DeepSpeed's bf16: float32 master weights and optimiser state)")
        rollouts = (f"rollouts: model.dtype {m.dtype} -> {self.rollout_dtype}: the vLLM engines' dtype "
                    f"(OpenRLHF 0.11 sets {VLLM_DTYPE})")
        return [update, rollouts, f"auto: {self.why}"]


def auto_bf16(cfg: Any) -> tuple[bool, str]:
    """Whether ``auto`` resolves to bf16 on the GPUs the run would use, and how that is known."""
    if cfg.backend.openrlhf.address:
        return True, ("bf16 on the Ray cluster's GPUs, which mrbench cannot probe from here (OpenRLHF "
                      "trains in bf16)")
    import torch

    if not torch.cuda.is_available():
        return True, "bf16 assumed: no CUDA GPU on this machine to check (training needs one)"
    from harness.models import bf16_supported

    if bf16_supported(torch.device("cuda")):
        return True, "bf16, which this node's GPU computes (as the local backend resolves it)"
    return False, "float32 on this node's GPU, which has no bf16 (as the local backend resolves it)"


def precision(cfg: Any) -> Precision:
    """``model.train_dtype`` and ``model.dtype`` resolved for OpenRLHF (see :class:`Precision`)."""
    m = cfg.model
    dtype = DTYPE_NAMES.get(m.dtype, m.dtype)  # bf16 -> bfloat16, ...: one name per dtype
    why = ""
    if "auto" in (m.train_dtype, dtype):
        bf16, why = auto_bf16(cfg)
    else:
        bf16 = True
    resolved = "bfloat16" if bf16 else "float32"
    return Precision(resolved if m.train_dtype == "auto" else m.train_dtype,
                     resolved if dtype == "auto" else dtype, why or "not used (no setting is auto)")


def train_batch_size(cfg: Any) -> int:
    """Samples per optimiser update: one step's ``prompts_per_step * G`` over ``mini_batches``."""
    s = cfg.sampling
    return s.prompts_per_step * s.group_size // max(1, cfg.optim.mini_batches)


def _num(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def submits_job(cfg: Any) -> bool:
    """Whether the run goes to a Ray cluster as a job (``backend.openrlhf.address`` is a dashboard URL)."""
    return (cfg.backend.openrlhf.address or "").startswith(("http://", "https://"))


def param_dtype(cfg: Any) -> str:
    """``--ds.param_dtype`` for ``model.train_dtype``; pre-flight refuses a dtype OpenRLHF cannot
    train in (:func:`harness.backends.openrlhf.checks.dtype_refusals`), so it never reaches here."""
    resolved = precision(cfg)
    if resolved.param_dtype is None:
        raise ValueError(f"model.train_dtype {cfg.model.train_dtype} ({resolved.train_dtype}): OpenRLHF 0.11 "
                         f"trains in bf16 or fp16 only")
    return resolved.param_dtype


def openrlhf_argv(cfg: Any, paths: CellPaths, model_source: str) -> list[str]:
    """The flags for ``openrlhf.cli.train_ppo_ray`` (see the module docstring). A Ray job runs in
    a copy of this repository (its working directory), so the agent file is named relative to it."""
    s, o, m, opts = cfg.sampling, cfg.optim, cfg.model, cfg.backend.openrlhf
    top = topology(opts)
    rows = cfg.schedule.steps * s.prompts_per_step
    agent = AGENT_FILE.relative_to(REPO_ROOT) if submits_job(cfg) else AGENT_FILE
    argv = [
        "--actor.model_name_or_path", model_source,
        "--train.agent_func_path", str(agent),
        "--data.prompt_dataset", str(paths.prompts), "--data.input_key", "input", "--data.label_key", "label",
        "--data.max_samples", str(rows), "--train.num_episodes", "1", "--train.max_epochs", "1",
        "--rollout.batch_size", str(s.prompts_per_step), "--rollout.n_samples_per_prompt", str(s.group_size),
        "--rollout.micro_batch_size", str(o.micro_batch_size), "--train.micro_batch_size", str(o.micro_batch_size),
        "--train.batch_size", str(train_batch_size(cfg)),
        "--rollout.max_new_tokens", str(s.max_new_tokens), "--data.max_len", str(s.max_prompt_tokens + s.max_new_tokens),
        "--rollout.temperature", _num(s.temperature), "--rollout.top_p", _num(s.top_p),
        "--train.seed", str(cfg.seed),
        "--actor.adam.lr", _num(o.lr), "--actor.adam.betas", *(_num(b) for b in o.betas),
        "--actor.adam.weight_decay", _num(o.weight_decay),
        "--actor.lr_scheduler", "constant", "--actor.lr_warmup_ratio", "0",
        "--actor.max_norm", _num(o.grad_clip),
        "--actor.eps_clip_low_high", _num(o.clip_low), _num(o.clip_high), "--actor.loss_agg_mode", "token-mean",
        "--algo.advantage.estimator", PLACEHOLDER_ESTIMATOR,
        "--algo.kl.init_coef", _num(o.kl_coef),
    ]
    if o.kl_coef > 0:
        argv += ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    if o.entropy_coef:
        argv += ["--actor.entropy_coef", _num(o.entropy_coef)]
    argv += ["--actor.num_nodes", str(top.nodes), "--actor.num_gpus_per_node", str(top.gpus_per_node),
             "--ref.num_nodes", str(top.nodes), "--ref.num_gpus_per_node", str(top.gpus_per_node),
             "--vllm.num_engines", str(top.engines), "--vllm.tensor_parallel_size", str(top.engine_tp),
             "--vllm.gpu_memory_utilization", _num(opts.vllm_gpu_memory_utilization), "--vllm.enable_prefix_caching"]
    if opts.colocate:
        argv += ["--train.colocate_all"] + ([] if opts.async_rollouts else ["--vllm.enable_sleep", "--ds.enable_sleep"])
    if opts.async_rollouts:
        argv += ["--train.async_enable"]
    argv += ["--ds.zero_stage", str(opts.zero_stage), "--ds.tensor_parallel_size", str(top.actor_tp),
             "--ds.ring_attn_size", str(top.ring), "--ds.param_dtype", param_dtype(cfg),
             "--ds.attn_implementation", opts.attn_implementation]
    if opts.adam_offload:
        argv += ["--ds.adam_offload"]
    if m.gradient_checkpointing:
        argv += ["--actor.gradient_checkpointing_enable"]
    if m.lora:
        argv += ["--ds.lora.rank", str(m.lora_r), "--ds.lora.alpha", str(m.lora_alpha),
                 "--ds.lora.dropout", _num(m.lora_dropout), "--ds.lora.target_modules", "all-linear"]
    every = cfg.schedule.checkpoint_every
    argv += ["--ckpt.path", str(paths.checkpoints), "--ckpt.output_dir", str(paths.final_weights),
             "--ckpt.load_enable", "--ckpt.save_steps", str(every if every > 0 else -1),
             "--logger.logging_steps", "1"]
    if opts.checkpoint_hf:
        argv += ["--ckpt.save_hf"]
    return argv + list(opts.extra_args)


#: every flag :func:`openrlhf_argv` may write: ``extra_args`` may not set them again
OWNED_FLAGS = frozenset({
    "--actor.model_name_or_path", "--train.agent_func_path", "--data.prompt_dataset", "--data.input_key",
    "--data.label_key", "--data.max_samples", "--train.num_episodes", "--train.max_epochs", "--rollout.batch_size",
    "--rollout.n_samples_per_prompt", "--rollout.micro_batch_size", "--train.micro_batch_size", "--train.batch_size",
    "--rollout.max_new_tokens", "--data.max_len", "--rollout.temperature", "--rollout.top_p", "--train.seed",
    "--actor.adam.lr", "--actor.adam.betas", "--actor.adam.weight_decay", "--actor.lr_scheduler",
    "--actor.lr_warmup_ratio", "--actor.max_norm", "--actor.eps_clip", "--actor.eps_clip_low_high",
    "--actor.loss_agg_mode", "--algo.advantage.estimator", "--algo.kl.init_coef", "--algo.kl.use_loss",
    "--algo.kl.estimator", "--actor.entropy_coef", "--actor.num_nodes", "--actor.num_gpus_per_node",
    "--ref.num_nodes", "--ref.num_gpus_per_node", "--vllm.num_engines", "--vllm.tensor_parallel_size",
    "--vllm.gpu_memory_utilization", "--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep",
    "--train.async_enable", "--ds.zero_stage", "--ds.tensor_parallel_size", "--ds.ring_attn_size",
    "--ds.param_dtype", "--ds.attn_implementation", "--ds.adam_offload", "--actor.gradient_checkpointing_enable",
    "--ds.lora.rank", "--ds.lora.alpha", "--ds.lora.dropout", "--ds.lora.target_modules", "--ckpt.path",
    "--ckpt.output_dir", "--ckpt.load_enable", "--ckpt.save_steps", "--ckpt.save_hf", "--logger.logging_steps",
    "--reward.remote_url", "--data.apply_chat_template", "--vllm.enable_prefix_caching",
})


#: OpenRLHF options that act on its scalar reward only: mrbench's advantages never read that scalar
SCALAR_REWARD_FLAGS = frozenset({"--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range",
                                 "--reward.overlong_buffer_len", "--reward.overlong_penalty_factor",
                                 "--reward.stop_properly_penalty_coef", "--reward.normalize_enable",
                                 "--reward.clip_range", "--algo.advantage.is_correction_level"})


#: OpenRLHF options that change its policy loss: the policy actors run mrbench's objective instead
#: (:mod:`harness.backends.openrlhf.update`, which refuses them again where the trainer is built)
UPDATE_FLAGS = frozenset({"--actor.dual_clip", "--actor.policy_loss_type", "--train.dynamic_batch_enable",
                          "--actor.aux_loss_coef", "--train.enable_ema"})


def owned_extra_flags(extra: list[str]) -> list[str]:
    """The flags of ``extra_args`` that the backend sets itself."""
    return [tok.split("=", 1)[0] for tok in extra if tok.split("=", 1)[0] in OWNED_FLAGS]


def scalar_reward_flags(extra: list[str]) -> list[str]:
    """The flags of ``extra_args`` that would shape OpenRLHF's scalar reward, which mrbench does not use."""
    return [tok.split("=", 1)[0] for tok in extra if tok.split("=", 1)[0] in SCALAR_REWARD_FLAGS]


def update_flags(extra: list[str]) -> list[str]:
    """The flags of ``extra_args`` that would change the policy update away from mrbench's objective."""
    return [tok.split("=", 1)[0] for tok in extra if tok.split("=", 1)[0] in UPDATE_FLAGS]


def runtime_env(paths: CellPaths, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The Ray runtime environment of every OpenRLHF process: mrbench importable, the cell found."""
    python_path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env_vars = {CELL_ENV: str(paths.cell), "PYTHONPATH": python_path}
    env_vars.update(env or {})
    return {"env_vars": env_vars}


def launch_command(cfg: Any, paths: CellPaths, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The process mrbench starts: the entry point on this machine, or ``ray job submit`` when
    ``backend.openrlhf.address`` is a Ray dashboard URL."""
    address = cfg.backend.openrlhf.address or ""
    run = [sys.executable, "-m", ENTRYPOINT, *argv]
    if submits_job(cfg):
        job_env = {"working_dir": str(REPO_ROOT), "excludes": ["results", ".venv", ".git"], **runtime_env(paths, env)}
        return ["ray", "job", "submit", "--address", address, "--runtime-env-json",
                json.dumps(job_env, sort_keys=True), "--", "python", "-m", ENTRYPOINT, *argv]
    return run


def shell_line(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)


def placement(cfg: Any) -> list[str]:
    """Where OpenRLHF puts the actors and engines (one line each)."""
    opts = cfg.backend.openrlhf
    top = topology(opts)
    where = opts.address or "a Ray instance started on this node"
    lines = [f"Ray: {where}"]
    gpus = top.actors if opts.colocate and not opts.async_rollouts else top.actors + top.engines * top.engine_tp
    lines.append(f"GPUs: {gpus} ({top.nodes} node(s) x {top.gpus_per_node} for the policy actors"
                 + ("" if opts.colocate and not opts.async_rollouts else
                    f", plus {top.engines * top.engine_tp} for the vLLM engines") + ")")
    dtype = precision(cfg).param_dtype
    for node in range(top.nodes):
        for gpu in range(top.gpus_per_node):
            rank = node * top.gpus_per_node + gpu
            share = []
            if opts.colocate and not opts.async_rollouts:
                engine = rank // max(1, top.engine_tp)
                if engine < top.engines:
                    share.append(f"vLLM engine {engine}" + (f" (TP rank {rank % top.engine_tp})" if top.engine_tp > 1
                                                            else ""))
            if cfg.optim.kl_coef > 0:
                share.append(f"reference actor {rank}")
            extra = f", sharing it with {' and '.join(share)}" if share else ""
            lines.append(f"  node {node} GPU {gpu}: policy actor rank {rank} (DeepSpeed ZeRO-{opts.zero_stage}, "
                         f"{dtype}){extra}")
    if not (opts.colocate and not opts.async_rollouts):
        lines.append(f"  vLLM: {top.engines} engine(s) x {top.engine_tp} GPU(s) in their own placement group")
    lines.append("  trainer (single controller): 1 CPU actor; rewards: mrbench's verifiers inside the vLLM engines")
    if top.data_parallel > 1:
        lines.append(f"  replay: one shard of whole prompt groups per policy actor ({top.data_parallel} shards)")
    return lines
