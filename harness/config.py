"""Typed configuration of one run (one task x algorithm x model x seed cell).

Sources, later ones winning: the dataclass defaults (the embedded main job), a YAML recipe
(``--config recipe.yaml`` or the name of a shipped recipe, e.g. ``toolcall-paper``), and dotted
command-line overrides (``--algo.beta 0.25 --sampling.group_size 4``). The fully resolved
config is saved with the results as ``config.json``.

Errors name the field: ``optim.lr: expected float, got 'fast'``; unknown fields list the known
ones. Algorithm parameters live in ``algo.params`` and are validated by the algorithm's own
config dataclass when the run starts (``--algo.beta 0.25`` sets ``algo.params['beta']``).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

RECIPES_DIR = Path(__file__).parent / "recipes"


class ConfigError(ValueError):
    """A bad configuration value; the message names the field."""


@dataclass
class TaskConfig:
    name: str = "ifollow"
    data_dir: str | None = None  # None: the task's built-in data (toolcall demo set, ifollow generated prompts)
    split: str = "train"
    limit: int | None = None  # cap on training examples
    options: dict[str, Any] = field(default_factory=dict)  # task constructor keyword arguments


@dataclass
class AlgoConfig:
    name: str = "mrtpo"
    params: dict[str, Any] = field(default_factory=dict)  # validated by the algorithm's config dataclass


@dataclass
class ModelConfig:
    name: str = "smollm2-135m"  # embedded name, hub id, or local path
    dtype: str = "auto"  # rollout/replay dtype: auto (bf16 where the CPU/GPU supports it), bfloat16, float16, float32
    train_dtype: str = "float32"  # master weights and the update
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    gradient_checkpointing: bool = False
    cache_dir: str | None = None  # where converted embedded weights are cached


@dataclass
class BackendConfig:
    name: str = "local"
    generator: str = "auto"  # auto (vllm when installed and a GPU is present), transformers, vllm
    vllm_gpu_memory_utilization: float = 0.5  # share of the GPU the vLLM engine may take
    replay_batch_size: int = 8  # sequences per replay forward pass
    replay_chunk_size: int = 128  # positions per LM-head / Jensen-Shannon chunk, capped at 12M / V (memory)
    share_prefix: bool = True  # reuse the KV cache of the shared prompt prefix during replay
    sampling_logits_mb: int = 512  # keep the sampling logits for the replay's P_all when they fit (0: never)
    # attention of the sampling/replay copy: auto (grouped matmuls for a separate CPU rollout copy, see
    # harness/attention.py; a copy shared with training, i.e. model.dtype == model.train_dtype, is left
    # alone), grouped_matmul, default (the model's own), or a transformers implementation name (sdpa, eager)
    rollout_attention: str = "auto"
    threads: int = 0  # CPU intra-op threads; 0 = auto (1 when the CPUs are already busy, else torch's default)


@dataclass
class SamplingConfig:
    prompts_per_step: int = 2
    group_size: int = 8  # G responses per prompt
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    max_new_tokens: int = 96
    max_prompt_tokens: int = 4096


@dataclass
class OptimConfig:
    lr: float = 1e-5
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch_size: int = 4  # sequences per forward/backward; gradients accumulate over the step
    mini_batches: int = 1  # optimiser updates per step (more than 1 makes the ratio and clipping matter)
    clip_low: float = 0.2  # epsilon_l of Eq. 3
    clip_high: float = 0.2  # epsilon_h of Eq. 3
    kl_coef: float = 0.0  # k3 estimator against the initial policy
    entropy_coef: float = 0.0


@dataclass
class ScheduleConfig:
    steps: int = 4
    checkpoint_every: int = 1  # steps; 0 = only at the end and on SIGTERM/SIGINT
    # evaluated greedily at the end of the run; None: the task's own (Task.default_benchmarks)
    eval_benchmarks: list[str] | None = None
    eval_other_tasks: bool = False  # allow a benchmark of another task in eval_benchmarks
    eval_limit: int | None = 8  # cases per benchmark for the end-of-run evaluation (None: all)
    eval_max_new_tokens: int | None = 128  # None: each benchmark's own default
    eval_data_dir: str | None = None
    log_samples: int = 4  # responses per step written to samples.jsonl


@dataclass
class OutputConfig:
    root: str = "results"
    dir: str | None = None  # explicit record directory (default: root/<task>/<algo>/<model-slug>/seed<N>)
    # keep checkpoint/ (final weights or adapter + optimiser) once the run has finished; the main
    # job drops it (SmolLM2's is ~1.6 GB), the paper recipes keep the trained policy
    keep_checkpoint: bool = False


@dataclass
class RunConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ---------------------------------------------------------------------------------------------
# building from nested dicts with type checks


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")
    if origin is list:
        (item_tp,) = typing.get_args(tp) or (Any,)
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [_coerce(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):
            try:  # YAML 1.1 reads "1e-6" as a string
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a name such as a model path "1" or a split "2024"
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    return value


def _build(cls: type, data: Any, where: str = "") -> Any:
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in known:
            raise ConfigError(f"{path}: unknown field; known fields of {where or 'the run'}: {', '.join(known)}")
        kwargs[key] = _coerce(value, hints[key], path)
    return cls(**kwargs)


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
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
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
        if isinstance(value, (dict,)) and not dotted.endswith(("params", "options")):
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


def resolve(recipe: str | None = None, overrides: list[tuple[str, str]] | None = None) -> RunConfig:
    data: dict[str, Any] = {}
    if recipe:
        data = load_recipe(recipe)
    if overrides:
        data = _merge(data, parse_overrides(overrides))
    # Strings for names given on the command line must stay strings ("1" is a fine seed, not a name)
    return _build(RunConfig, data)


def from_dict(data: dict[str, Any]) -> RunConfig:
    return _build(RunConfig, data)


def model_slug(name: str) -> str:
    """A directory-safe slug of a model name: ``Qwen/Qwen2.5-1.5B-Instruct`` -> ``qwen2.5-1.5b-instruct``."""
    base = name.rstrip("/").split("/")[-1] if "/" in name else name
    slug = "".join(c if (c.isalnum() or c in "._-") else "-" for c in base.lower())
    return slug.strip("-.") or "model"
