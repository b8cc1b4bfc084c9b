"""Rollouts sampled by vLLM instead of transformers' ``generate`` (same result structure).

:class:`VLLMGenerator` wraps one ``vllm.LLM`` built from the policy's weights: the model's source
(hub id or local directory) when given, else a ``save_pretrained`` copy written under the run
record. The engine runs in the rollout dtype with prefix caching (the G samples of a prompt share
its prefill) and ``backend.local.vllm_gpu_memory_utilization`` of the GPU.

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

vLLM does not expose its final hidden states, so rollouts made here carry ``hidden=None`` and the
replay recomputes P_all (see ``_sampling_pass`` in :mod:`harness.replay_builders`).

Weight sync: after every optimiser step :meth:`VLLMGenerator.sync` pushes the policy's state dict
(cast to the rollout dtype) into the engine's model with its ``load_weights``, reached either

1. in-process through ``llm.llm_engine.model_executor.driver_worker.model_runner.model`` (older
   vLLM, V0 engine), or
2. through ``llm.apply_model(fn)`` (newer vLLM), or ``llm.collective_rpc(fn)`` when only that
   exists; both call ``fn`` on the model in every worker. For these the engine is built with
   ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (unless the caller set it) so that the weights are handed
   over in-process rather than serialised to a worker process.

Anything else raises :class:`VLLMError` naming the installed version. LoRA policies are refused:
the engine would need the merged weights, which this module does not compute.
"""

from __future__ import annotations

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


def vllm_missing() -> str | None:
    """Why vLLM rollouts are unavailable in this process (``None`` when ``import vllm`` works and CUDA is present)."""
    reasons = []
    try:
        importlib.import_module("vllm")
    except ImportError as exc:
        reasons.append(f"vllm is not installed ({exc}; pip install vllm)")
    if not torch.cuda.is_available():
        reasons.append("no CUDA GPU is available (torch.cuda.is_available() is False)")
    return "; ".join(reasons) or None


def choose_generator(requested: str) -> str:
    """``"vllm"`` or ``"transformers"`` for ``backend.local.generator``: "auto" picks vLLM only when it
    imports and a GPU is present; "vllm" without them raises :class:`VLLMError` saying what is missing."""
    known = ("auto", "transformers", "vllm")
    if requested not in known:
        raise ValueError(f"unknown backend.local.generator={requested!r}; known: {', '.join(known)}")
    if requested == "transformers":
        return "transformers"
    missing = vllm_missing()
    if missing is None:
        return "vllm"
    if requested == "vllm":
        raise VLLMError(f"backend.local.generator='vllm' needs vllm and a CUDA GPU: {missing}; "
                        f"use 'auto' or 'transformers' to sample with transformers' generate")
    return "transformers"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _is_hub_id_or_dir(source: str | None) -> bool:
    if not source or source == "in-memory":
        return False
    return Path(source).is_dir() or (source.count("/") == 1 and not source.startswith((".", "/")))


class VLLMGenerator:
    """``VLLMGenerator(policy, tokenizer, ...)``; ``sample(prompts, G, eos, sampling, seed)``; ``sync(policy)``."""

    def __init__(self, policy: Any, tokenizer: Any, *, dtype: torch.dtype, gpu_memory_utilization: float,
                 work_dir: str | Path, source: str | None = None, seed: int = 0,
                 max_model_len: int | None = None):
        if hasattr(policy, "peft_config"):
            raise VLLMError("backend.local.generator='vllm' does not support model.lora (the engine needs merged "
                            "weights); use backend.local.generator='transformers'")
        if not 0.0 < gpu_memory_utilization <= 1.0:
            raise ValueError(f"backend.local.vllm_gpu_memory_utilization must be in (0, 1], "
                             f"got {gpu_memory_utilization}")
        self.dtype = dtype
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.vllm = importlib.import_module("vllm")
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
                                  "enable_prefix_caching": True, "gpu_memory_utilization": gpu_memory_utilization,
                                  "seed": seed}
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        self.llm = self.vllm.LLM(**kwargs)
        self.syncs = 0
        self.sync(policy)  # the policy may differ from the source (a resumed run)

    # -- sampling --------------------------------------------------------------------------------
    def sampling_params(self, group_size: int, eos: Sequence[int], sampling: Any, seed: int | None) -> Any:
        """vLLM ``SamplingParams`` for one prompt (``sampling`` is a :class:`harness.config.SamplingConfig`)."""
        greedy = sampling.temperature <= 0
        return self.vllm.SamplingParams(
            n=group_size, temperature=0.0 if greedy else float(sampling.temperature),
            top_p=1.0 if greedy else float(sampling.top_p),
            top_k=-1 if (greedy or sampling.top_k is None) else int(sampling.top_k),
            max_tokens=int(sampling.max_new_tokens), seed=seed, stop_token_ids=[int(e) for e in eos])

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
        for g, request_out in enumerate(outputs):
            completions = list(request_out.outputs)
            if len(completions) != group_size:
                raise VLLMError(f"vLLM returned {len(completions)} samples for prompt {g}, expected {group_size}")
            for c in sorted(completions, key=lambda c: getattr(c, "index", 0)):
                out.append(completion_ids(c, eos))
        return out

    # -- weights ---------------------------------------------------------------------------------
    def _weights(self, policy: Any) -> list[tuple[str, torch.Tensor]]:
        return [(name, t.detach().to(self.dtype)) for name, t in policy.state_dict().items()]

    def sync(self, policy: Any) -> None:
        """Load the policy's current weights into the engine (see the module docstring for the paths)."""
        weights = self._weights(policy)
        load_into(self.llm, weights, getattr(self.vllm, "__version__", "?"))
        self.syncs += 1
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if callable(reset):  # cached prefixes hold keys/values of the old weights
            reset()


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
    """Call ``load_weights(weights)`` on the engine's model; returns the path used
    ("driver_worker", "apply_model" or "collective_rpc")."""
    weights = list(weights)
    try:
        model = llm.llm_engine.model_executor.driver_worker.model_runner.model
    except AttributeError:
        model = None
    if model is not None and hasattr(model, "load_weights"):
        model.load_weights(weights)
        return "driver_worker"

    def push(m: Any) -> None:
        m.load_weights(weights)

    if callable(getattr(llm, "apply_model", None)):
        llm.apply_model(push)
        return "apply_model"
    if callable(getattr(llm, "collective_rpc", None)):
        def on_worker(worker: Any) -> None:
            push(worker.model_runner.model)

        llm.collective_rpc(on_worker)
        return "collective_rpc"
    raise VLLMError(f"cannot push weights into this vLLM (version {version}): it has neither "
                    f"llm_engine.model_executor.driver_worker.model_runner.model, nor LLM.apply_model, "
                    f"nor LLM.collective_rpc; use backend.local.generator='transformers'")
