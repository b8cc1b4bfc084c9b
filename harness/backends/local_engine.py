"""The local backend's engine: the in-process models and the operations the shared step
(:class:`harness.training.step.Step`) asks of them, on CPU or one GPU.

- the policy: float32 master weights (``MASTER_DTYPE``), gradients and optimiser state, optionally
  LoRA (peft), with gradient checkpointing when asked;
- the rollout model (theta_old): the policy itself when the rollout runs in float32 (switched to
  the rollout attention for sampling and replay only), else a copy cast to the rollout dtype
  (bf16 where native, :mod:`harness.models`; on CPU its linear layers keep their weights in
  oneDNN's layout, :mod:`harness.packed_linear`), synced after every update; or vLLM
  (:mod:`harness.backends.vllm_rollout`) for sampling;
- the reference policy (initial weights; k3 KL when ``optim.kl_coef > 0``, OPSD's teacher), only
  loaded when needed; with LoRA it is the base model with the adapter disabled.

Engine operations (:class:`harness.training.engine.Engine`):

- ``sample``: G responses per prompt with the rollout model, keeping the sampled ids; when the
  replay needs the sampling prompt's pass (MRTPO's P_all, CoRT's x+) the sampler records its hidden
  states (``Rollout.hidden``), so only the P_\\k contexts are replayed, until a replay shows that
  the task's P_all is not the prompt; when the algorithm asks for the entropy (forking tokens, GTPO)
  the sampler computes it from the logits it already makes (``Rollout.entropy``; with vLLM, which
  returns none, the replay's forward pass computes it);
- ``replay``: the replay builder's forward passes (:class:`harness.replay.ReplayEngine`) with the
  rollout model, or the reference policy for OPSD's teacher;
- ``update``: :class:`harness.backends.update.PolicyUpdate` (AdamW, gradient clipping,
  ``mini_batches`` optimiser updates per step of ``micro_batch_size`` micro-batches, computing in
  bf16 under autocast where the host has native bf16, ``model.train_dtype``);
- ``sync``: the rollout copy (and vLLM) take the updated weights;
- ``save`` / ``load``: the checkpoint (:mod:`harness.backends.checkpoint`).
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Sequence
from typing import Any

import torch

from harness.attention import rollout_attention, use_for_rollout, use_for_training
from harness.backends import checkpoint
from harness.backends.rollout import rollouts_for
from harness.backends.update import PolicyUpdate, Reference
from harness.backends.vllm_rollout import VLLMGenerator, choose_generator
from harness.models import (
    cast_weights,
    chat_prompt_ids,
    eos_ids,
    load_model,
    resolve_device,
    resolve_dtype,
    resolve_train_dtype,
)
from harness.packed_linear import pack_linears
from harness.records import config_fingerprint
from harness.replay import ReplayEngine
from harness.replay_builders import ReplayResult, replay_for
from harness.system import thread_choice
from harness.training.engine import StepPlan

#: the dtype of the policy's weights, gradients and optimiser state, whatever the compute dtype
MASTER_DTYPE = torch.float32


def replay_head_float32(choice: str, rollout_dtype: torch.dtype) -> bool:
    """``backend.local.replay_head``: the replay statistics' LM head in float32 (``auto``: whenever
    the rollout runs below float32, where the head's rounded outputs add noise to the relevance; the
    choice is checked where it is declared, ``harness.config``)."""
    return choice == "float32" or (choice == "auto" and rollout_dtype != torch.float32)


def exact_replay_batches(choice: str) -> bool:
    """``backend.local.replay_batching``: padded (the default) or exact. Exact batches take the bf16
    relevance floor to 0 but the replay 15-21% longer on CPU and about twice as long on a GPU
    (bench/README.md), more than the 10% of replay time a default may cost."""
    return choice == "exact"


class LocalEngine:
    """The local backend's models and engine operations (see the module docstring); the local
    backend is built on it. ``update`` is the :class:`PolicyUpdate` (called as the engine's update)."""

    cfg: Any
    algorithm: Any
    task: Any

    def _init_engine(self, cfg: Any) -> None:
        self.device = resolve_device(cfg.model.device)
        self.rollout_dtype = resolve_dtype(cfg.model.dtype, self.device)
        self.train_dtype = resolve_train_dtype(cfg.model.train_dtype, self.device)  # the update's compute dtype
        self.policy: Any = None
        self.rollout_model: Any = None
        self.tokenizer: Any = None
        self.reference: Reference | None = None  # the initial policy, when a KL term or the algorithm needs it
        self.update: PolicyUpdate | None = None  # built once the policy is loaded
        self._engine: ReplayEngine | None = None
        self.rollout_attention_name: str | None = None
        self.train_attention_name: str | None = None
        self._keep_hidden = True
        self.threads_reason: str | None = None  # why this many CPU threads (said at the start, kept in rollout)
        if self.device.type == "cpu":
            threads, self.threads_reason = thread_choice(cfg.backend.local.threads)
            torch.set_num_threads(threads)
        # "auto": vLLM when it imports and CUDA is present; "vllm" where it cannot run raises VLLMError
        self.generator_name = choose_generator(cfg.backend.local.generator, self.rollout_dtype)
        self._vllm: Any = None
        self._renaming: checkpoint.Renaming | None = None  # the last checkpoint's rename, while it runs

    # -- the models ----------------------------------------------------------------------------
    def _load_policy(self) -> None:
        m = self.cfg.model
        loaded = load_model(m.name, dtype=MASTER_DTYPE, device=self.device, cache_dir=m.cache_dir)
        self.tokenizer, self.model_source = loaded.tokenizer, loaded.source
        policy = loaded.model
        if m.gradient_checkpointing:
            policy.gradient_checkpointing_enable()
        if m.lora:
            try:
                from peft import LoraConfig, get_peft_model
            except ImportError as exc:
                raise RuntimeError("model.lora needs peft: pip install 'mrbench[lora]'") from exc
            policy = get_peft_model(policy, LoraConfig(r=m.lora_r, lora_alpha=m.lora_alpha,
                                                       lora_dropout=m.lora_dropout, target_modules="all-linear",
                                                       task_type="CAUSAL_LM"))
        self.train_attention_name = use_for_training(policy, self.cfg.backend.local.train_attention, self.train_dtype)
        self.policy = policy
        self.eos = eos_ids(self.tokenizer, loaded.model)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos[0]
        self.reference = None
        if self._needs_reference():  # the initial weights, copied before any update or resume
            self.reference = (Reference(policy, adapter_disabled=True) if m.lora
                              else Reference(copy.deepcopy(policy).eval().requires_grad_(False)))
        self.update = PolicyUpdate(policy, self.cfg.optim, self.cfg.sampling.temperature, self.pad_id, self.device,
                                   reference=self.reference, compute_dtype=self.train_dtype)
        attention = self.cfg.backend.local.rollout_attention
        if self.rollout_dtype == MASTER_DTYPE:
            # one copy serves both: it samples and replays with the rollout attention (switched on for
            # those phases only, see _rollout_phase) and trains with its own
            self.rollout_model = policy
            with rollout_attention(policy, attention) as name:
                self.rollout_attention_name = name
        else:
            # cast as from_pretrained casts: this copy decodes as <record>/model/ loaded in this dtype does
            self.rollout_model = cast_weights(copy.deepcopy(policy), self.rollout_dtype).eval()
            for p in self.rollout_model.parameters():
                p.requires_grad_(False)
            self.rollout_attention_name = use_for_rollout(self.rollout_model, attention)
            pack_linears(self.rollout_model)  # bf16 on CPU: the weights reordered once per sync

    def _needs_reference(self) -> bool:
        return self.cfg.optim.kl_coef > 0 or bool(self.algorithm is not None and self.algorithm.needs_reference)

    def replay_head_float32(self) -> bool:
        return replay_head_float32(self.cfg.backend.local.replay_head, self.rollout_dtype)

    def exact_replay_batches(self) -> bool:
        return exact_replay_batches(self.cfg.backend.local.replay_batching)

    def _start_replay(self) -> None:
        """The replay's forward-pass runner on the rollout model (theta_old)."""
        self._engine = ReplayEngine.from_config(self.rollout_model, self.cfg.replay, self.pad_id,
                                                self.cfg.sampling.temperature, head_float32=self.replay_head_float32(),
                                                exact_batches=self.exact_replay_batches())

    def _rollout_phase(self) -> Any:
        """The context of sampling and replay: the rollout attention on a copy shared with training."""
        if self.rollout_model is self.policy:
            return rollout_attention(self.policy, self.cfg.backend.local.rollout_attention)
        return contextlib.nullcontext()

    def _start_vllm(self, record: Any, examples: list[Any]) -> None:
        """The vLLM engine (when chosen), built after any resume so it starts from the current weights;
        its context fits the longest training prompt plus ``max_new_tokens``."""
        if self.generator_name == "vllm" and self._vllm is None:
            s = self.cfg.sampling
            longest = max(len(chat_prompt_ids(self.tokenizer, ex.messages)) for ex in examples)
            self._vllm = VLLMGenerator(self.policy, self.tokenizer, dtype=self.rollout_dtype,
                                       gpu_memory_utilization=self.cfg.backend.local.vllm_gpu_memory_utilization,
                                       work_dir=record.path, source=self.model_source, seed=self.cfg.seed,
                                       max_model_len=longest + s.max_new_tokens,
                                       max_sequences=s.prompts_per_step * s.group_size)

    def _close_vllm(self) -> None:
        if self._vllm is not None:  # the engine's memory goes back before evaluation
            self._vllm.close()
            self._vllm = None

    # -- engine operations (harness.training.engine.Engine) --------------------------------------
    def sample(self, examples: Sequence[Any], plan: StepPlan, seed: int) -> list[Any]:
        """G responses per prompt with the rollout model (theta_old), recording the sampling pass
        when the replay needs it (vLLM exposes no hidden states: the replay then recomputes it)."""
        s = self.cfg.sampling
        self._engine.refresh()  # the rollout weights changed at the last update
        self.rollout_model.eval()
        keep = plan.sampling_prompt_replayed and self._keep_hidden and self._vllm is None
        with self._rollout_phase():
            return rollouts_for(self.rollout_model, self.tokenizer, list(examples), s.group_size, self.eos, s,
                                s.max_prompt_tokens, keep_hidden=keep, generator=self._vllm, seed=seed,
                                logits_budget=self.cfg.backend.local.sampling_logits_mb << 20,
                                keep_entropy=plan.sampling_entropy)

    def replay(self, plan: StepPlan, rollouts: Sequence[Any], rewards: torch.Tensor, group_ids: torch.Tensor,
               T: int) -> ReplayResult:
        """The replay's forward passes with the rollout model (theta_old), or the reference policy
        for OPSD's teacher."""
        engine, teacher = self._engine, contextlib.nullcontext()
        if plan.teacher:
            ref = self.update.reference_policy()
            engine = ReplayEngine.from_config(ref.model, self.cfg.replay, self.pad_id, engine.temperature)
            teacher = ref.active()
        with torch.no_grad(), teacher, self._rollout_phase():
            rep = replay_for(plan.request, engine, self.task, self.tokenizer, rollouts, rewards, group_ids, T)
        if rep.sequences and not rep.sampling_hidden_used and any(r.hidden is not None for r in rollouts):
            self._keep_hidden = False  # this task's P_all is not the sampling prompt
        return rep

    def sync(self) -> None:
        if self.rollout_model is not self.policy:
            with torch.no_grad():
                self.rollout_model.load_state_dict(self.policy.state_dict())
        if self._vllm is not None:
            with torch.no_grad():
                self._vllm.sync(self.policy)

    def _fingerprint(self, record: Any) -> str:
        """Of the configuration the record holds (its config.json: the first run's, which a resume
        continues); execution fields (threads) may change on resume."""
        of_record = getattr(record, "config_fingerprint", None)
        return of_record() if of_record is not None else config_fingerprint(self.cfg)

    def save(self, record: Any, step: int, position: int) -> None:
        """The checkpoint after ``step``; after the last one without the optimiser state (no update
        follows, and two thirds of a full fine-tune's bytes are AdamW's moments) unless
        ``output.keep_checkpoint`` keeps it for later."""
        last = step >= self.cfg.schedule.steps and not self.cfg.output.keep_checkpoint
        self.checkpoint_written()
        written = checkpoint.write(record.checkpoint_dir, step=step, model=self.policy,
                                   optimizer=None if last else self.update.optimizer,
                                   data_position=position, fingerprint=self._fingerprint(record))
        self._renaming = checkpoint.Renaming(written)  # in place while the next step runs

    def checkpoint_written(self, during: BaseException | None = None) -> None:
        """Wait until the last checkpoint is in place (its rename runs in a thread; see
        :mod:`harness.backends.checkpoint`): before the next one, at the end of the run, on a stop.
        ``during``: the error the run is stopping on; a failed rename is then said in one line
        instead of raised, so the record keeps the error that stopped it."""
        renaming = self._renaming
        if renaming is None:
            return
        try:
            renaming.wait()
        except Exception as exc:
            if during is None:
                raise
            print(f"mrbench: the checkpoint after step {renaming.written.step} was not put in place "
                  f"({type(exc).__name__}: {exc}); the previous one stays", file=sys.stderr)
        finally:
            self._renaming = None  # its thread is done: wait returns or raises only then

    def load(self, record: Any) -> tuple[int, int] | None:
        """The record's checkpoint, if any, into the policy, the optimiser and the RNG (refused when
        it is another configuration's, or a final one with steps left): (steps done, data position)."""
        state = checkpoint.load(record.checkpoint_dir)
        if state is None:
            return None
        steps = self.cfg.schedule.steps
        known = getattr(record, "config_fingerprints", lambda: [self._fingerprint(record)])()
        checkpoint.check_resumable(state, record.checkpoint_dir, known, steps)
        checkpoint.load_trainable_state(self.policy, state["model"])
        if "optimizer" in state:
            self.update.optimizer.load_state_dict(state["optimizer"])
        elif int(state["step"]) < steps:
            raise checkpoint.CheckpointError(f"{record.checkpoint_dir}: a final checkpoint (no optimiser state) "
                                             f"after step {state['step']} of {steps}; remove it to "
                                             f"restart the run from step 0")
        checkpoint.set_rng_state(state["rng"])
        self.sync()
        return int(state["step"]), int(state["data_position"])

    def _export_source(self) -> Any:
        """What model/ holds: the weights the run decoded with (its rollout copy, synced after the
        last update; bf16 where it sampled in bf16: half the bytes of the float32 master weights,
        and loaded as it is it decodes as the end-of-run evaluation does); a LoRA policy's adapter."""
        if hasattr(self.policy, "peft_config") or self.rollout_model is self.policy:
            return self.policy
        self.sync()
        return self.rollout_model

    def _eval_model(self) -> None:
        if self.rollout_model is None:  # evaluation only: one copy, in the rollout dtype
            m = self.cfg.model
            loaded = load_model(m.name, dtype=self.rollout_dtype, device=self.device, cache_dir=m.cache_dir)
            self.tokenizer, self.rollout_model = loaded.tokenizer, loaded.model
            self.eos = eos_ids(self.tokenizer, loaded.model)
            self.rollout_attention_name = use_for_rollout(self.rollout_model, self.cfg.backend.local.rollout_attention)
            pack_linears(self.rollout_model.requires_grad_(False))  # it only generates
