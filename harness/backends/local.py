"""The local backend: in-process training on CPU or one GPU.

Its loop is "for each step, run the step on this engine": the step is the shared
:class:`harness.training.step.Step` (plan, sample, score, replay, advantages, credit rows, update, metrics
row and samples, in that order; its ALGO LOGIC phases are the algorithm's part, the rest is
plumbing), and the engine is :class:`harness.backends.local_engine.LocalEngine` (the in-process
models: sampling, the replay's forward passes, the update, the weight sync, checkpoints), on which
this backend is built.

The loop is the shared one (:class:`harness.training.run_loop.RunLoop`): it resumes from the
engine's checkpoint (the data position, the weights, the optimiser and the RNG), checkpoints every
``checkpoint_every`` steps and on SIGTERM/SIGINT (then raising :class:`TrainingInterrupted`),
stops early without signal (:mod:`harness.no_signal`), says the time left and shows the progress.
Around it this backend loads the policy, runs the run's prologue with the policy's tokenizer
(:meth:`harness.training.step.Step.open`: the data, the record, the Step with its credit log and
relevance guard), starts vLLM from the resumed weights and, with ``output.save_model``, writes the
final policy to ``<record>/model/`` in Hugging Face format (:mod:`harness.backends.export`).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness.backends import BACKENDS
from harness.backends.base import Backend
from harness.backends.export import save_model
from harness.backends.honours import LOOP_FIELDS, STEP_FIELDS
from harness.backends.local_engine import MASTER_DTYPE, LocalEngine
from harness.backends.rollout import greedy_texts
from harness.backends.vllm_rollout import vllm_refusal, vllm_unavailable
from harness.config import RunConfig
from harness.fingerprint import run_fingerprint
from harness.models import chat_prompt_ids, generation_bytes
from harness.numerics import measured
from harness.replay import unwrap
from harness.system import native_bf16
from harness.training.run_loop import RunLoop
from harness.training.step import Step
from mrbench_core.replay_kinds import ReplayRequest


@BACKENDS.register("local")
class LocalBackend(LocalEngine, Backend):
    """In-process trainer on CPU or one GPU (transformers generate, optional vLLM)."""

    name = "local"
    supported_replays = frozenset(ReplayRequest)
    supports_reference = True
    supports_extra_loss = True
    honours = STEP_FIELDS | LOOP_FIELDS | frozenset({
        "model.name", "model.dtype", "model.train_dtype", "model.device", "model.lora", "model.lora_r",
        "model.lora_alpha", "model.lora_dropout", "model.gradient_checkpointing", "model.cache_dir", "backend.local", "replay",
        "sampling.group_size", "sampling.temperature", "sampling.top_p", "sampling.top_k", "sampling.max_new_tokens",
        "optim.lr", "optim.betas", "optim.weight_decay", "optim.grad_clip", "optim.micro_batch_size",
        "optim.mini_batches", "optim.clip_low", "optim.clip_high", "optim.kl_coef", "optim.entropy_coef",
        "output.save_model", "output.save_merged"})

    def __init__(self, cfg: RunConfig, task: Any | None = None, algorithm: Any | None = None):
        Backend.__init__(self, cfg, task, algorithm)
        self.step: Step | None = None  # the run's training step, built by its prologue (Step.open)
        self.loop: RunLoop | None = None  # the run loop around it (harness.training.run_loop)
        #: train only the first N steps and checkpoint none (``mrbench verify``: RunLoop's stop_after)
        self.stop_after: int | None = None
        self._init_engine(cfg)

    @property
    def task(self) -> Any:
        """The run's task; built from the config at first use when none was given (the bench scripts
        sample and replay with a backend they never train)."""
        if self._task is None:
            from tasks.registry import make_task

            self._task = make_task(self.cfg.task.name, **self.cfg.task.options)
        return self._task

    @task.setter
    def task(self, value: Any) -> None:
        self._task = value

    def rollout_info(self) -> dict[str, Any]:
        """How sampling and replay run: precision, attention implementation, CPU threads, and
        whether the host has native bf16 (a slow run explains itself)."""
        return {"dtype": str(self.rollout_dtype).removeprefix("torch."), "attention": self.rollout_attention_name,
                "replay_head": "float32" if self.replay_head_float32() else "model",
                "replay_batching": "exact" if self.exact_replay_batches() else "padded",
                "threads": torch.get_num_threads(), "threads_reason": self.threads_reason,
                "shared_with_training": self.rollout_model is self.policy,
                "host_native_bf16": native_bf16()}

    def numerics_info(self) -> dict[str, Any]:
        """This run's part of the record's numerics block (:func:`harness.numerics.measured`: the
        fingerprint of this code on this device, probed through this backend's step, the dtypes
        and the kernels)."""
        rollout = str(self.rollout_dtype).removeprefix("torch.")
        dtypes = {"rollout": rollout, "replay_head": "float32" if self.replay_head_float32() else rollout,
                  "update": str(self.train_dtype).removeprefix("torch."),
                  "master": str(MASTER_DTYPE).removeprefix("torch.")}
        kernels = {"generator": self.generator_name, "attention": self.rollout_attention_name,
                   "train_attention": self.train_attention_name, "replay_batching": "exact" if self.exact_replay_batches() else "padded",
                   "threads": torch.get_num_threads()}
        return measured(self.device, dtypes, kernels, found=run_fingerprint(self.device, LocalBackend))

    def update_info(self) -> dict[str, Any]:
        """How the update computes: ``model.train_dtype`` as given and resolved (bf16 mixed precision
        or float32), over float32 master weights and optimiser state."""
        return {"train_dtype": self.cfg.model.train_dtype,
                "compute_dtype": str(self.train_dtype).removeprefix("torch."),
                "master_dtype": str(MASTER_DTYPE).removeprefix("torch."), "attention": self.train_attention_name,
                "optimizer": "AdamW, fused" if self.update is not None and self.update.fused else "AdamW",
                "host_native_bf16": native_bf16()}

    @classmethod
    def refuses(cls, cfg: Any, algorithm: Any) -> str | None:
        return vllm_refusal(cfg)

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        return vllm_unavailable(cfg)

    # -- generation for evaluation ---------------------------------------------------------------
    def generate(self, messages_list: list[list[dict[str, str]]], max_new_tokens: int,
                 greedy: bool = True) -> list[str]:
        """Greedy responses (the trained policy after ``train``, else the configured model)."""
        self._eval_model()
        self.rollout_model.eval()
        with self._rollout_phase():
            return greedy_texts(self.rollout_model, self.tokenizer, messages_list, self.eos, max_new_tokens)

    def generation_bytes(self, messages: list[dict[str, str]], max_new_tokens: int, batch: int) -> int:
        """Memory a greedy generation of ``batch`` prompts like ``messages`` needs
        (:func:`harness.models.generation_bytes`), so that an end-of-run evaluation leaves out the
        cases that cannot fit before it starts (:mod:`evals.eval_budget`)."""
        self._eval_model()
        length = len(chat_prompt_ids(self.tokenizer, messages)) + max_new_tokens
        fused = self.device.type == "cuda" and self.rollout_attention_name in ("sdpa", "flash_attention_2")
        return generation_bytes(unwrap(self.rollout_model).config, length, batch, self.rollout_dtype, scores=not fused)

    def memory_available(self) -> int | None:
        """Free bytes of the device generation runs on (a GPU's); None on CPU (the host's memory)."""
        if self.device.type == "cuda":
            return int(torch.cuda.mem_get_info(self.device)[0])
        return None

    # -- the run ------------------------------------------------------------------------------------
    def train(self, record: Any) -> dict[str, Any]:
        cfg, t_run = self.cfg, time.time()
        task, algorithm = self.run_objects()
        self._load_policy()
        self.step, examples = Step.open(cfg, task, algorithm, record, self.tokenizer, extra={
            "backend": "local", "model_source": self.model_source, "device": str(self.device),
            "generator": self.generator_name, "rollout_dtype": str(self.rollout_dtype), "rollout": self.rollout_info(),
            "update": self.update_info(), "numerics": self.numerics_info()})
        self.policy.train()
        if self.threads_reason:
            print(f"mrbench: {torch.get_num_threads()} CPU thread(s): {self.threads_reason}")
        self.loop = RunLoop(self.step, self, record, started=t_run, stop_after=self.stop_after)
        self.loop.resume()
        self._start_vllm(record, examples)  # after the resume: it starts from the current weights
        self._start_replay()
        try:
            try:
                self.loop.run(examples)
            finally:
                self._close_vllm()  # the engine's memory goes back before evaluation
            self.rollout_model.eval()
            if cfg.output.save_model:  # the trained policy to take away: <record>/model/
                record.update_provenance(model=save_model(self._export_source(), self.tokenizer, record.path,
                                                          eos=list(self.eos),
                                                          merged=cfg.output.save_merged))
        except BaseException as exc:
            self.checkpoint_written(during=exc)
            raise
        self.checkpoint_written()  # the last checkpoint's rename ran beside the export
        return {**self.loop.summary(), **self.step.guard.summary(), "rollout": self.rollout_info(),
                "update": self.update_info()}
