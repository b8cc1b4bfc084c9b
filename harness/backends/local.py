"""The local backend: in-process training on CPU or one GPU.

One training step (0-based ``n``; metrics rows use ``step = n + 1``):

1. take ``prompts_per_step`` examples (an epoch-wise permutation from the ``data-order`` stream of
   :mod:`mrbench_core.seeds` for (seed, epoch), :mod:`harness.backends.data_order`) from the data
   position, the index of the next example; the checkpoint saves the position and a resumed run
   reads it back, so it sees the same prompts;
2. sample G responses each with the rollout model (bf16 where native, see :mod:`harness.models`),
   or with vLLM (:mod:`harness.backends.vllm_rollout`, synced after every update), keeping the
   sampled ids; the torch RNG is seeded from the ``sampling`` stream for (seed, n) at the start of
   every step, so an interrupted and resumed run reproduces an uninterrupted one;
3. score every response with the task's verifiers -> rewards[B, K] (NaN-padded where K varies);
4. replay what the algorithm asks (:mod:`harness.replay_builders`) with the rollout model (= theta_old);
   when MRTPO's P_all (or CoRT's x+) is the sampling prompt, the hidden states recorded during
   sampling serve as that pass (``Rollout.hidden``), so only the P_\\k contexts are replayed;
5. token advantages from the algorithm, one call (:mod:`harness.backends.algo_step`, shared with
   the openrlhf backend: the step plan, the batch builder ``ReplayResult.to_batch``, the typed
   :class:`algorithms.Advantages`);
6. the update, :class:`harness.backends.update.PolicyUpdate` (built with the policy, the reference,
   ``optim.*``, the temperature and the pad id; :mod:`harness.backends.loss`): float32 master
   weights and optimiser state, computing in bf16 under autocast where the host has native bf16
   (``model.train_dtype auto``, :func:`harness.models.resolve_train_dtype`), AdamW, gradient
   clipping, ``mini_batches`` optimiser updates per step, each accumulating micro-batches of
   ``micro_batch_size`` sequences. With one mini-batch the old
   log-probabilities are the detached current ones (rho = 1 exactly); with several they come
   from one no-grad pass of the policy before the first update.
7. metrics row, samples, the credit rows of ``output.credit_groups`` groups (:mod:`harness.credit.trainlog`,
   from the step's advantages result), checkpoint every ``checkpoint_every`` steps and on SIGTERM/SIGINT.

``LocalBackend._step`` reads in this order; its ALGO LOGIC blocks are the algorithm's part, the rest
is plumbing, and each phase is timed into the row (``time_<phase>``) and marked ``mrbench/<phase>``
for torch.profiler.

At the end, with ``output.save_model``, the final policy goes to ``<record>/model/`` in Hugging
Face format (:mod:`harness.backends.export`).

The reference policy (initial weights; k3 KL when ``optim.kl_coef > 0``, OPSD's teacher) is only
loaded when needed; with LoRA it is the base model with the adapter disabled.
"""

from __future__ import annotations

import contextlib
import copy
import signal
import time
from typing import Any

import torch

from harness.attention import rollout_attention, use_for_rollout
from harness.backends import BACKENDS, checkpoint, stop_signal
from harness.backends.algo_step import StepPlan, plan_step, step_advantages
from harness.backends.base import Backend
from harness.backends.data_order import examples_at
from harness.backends.export import save_model
from harness.backends.phases import PhaseTimes
from harness.backends.relevance_guard import RelevanceGuard
from harness.backends.rollout import batch_tensors, fit_prompts, greedy_texts, reward_lows, rollouts_for
from harness.backends.step_metrics import run_summary, sample_rows, step_row
from harness.backends.update import PolicyUpdate, Reference
from harness.backends.vllm_rollout import VLLMGenerator, choose_generator, vllm_refusal, vllm_unavailable
from harness.config import RunConfig
from harness.credit.trainlog import CreditLog
from harness.models import (
    cast_weights,
    chat_prompt_ids,
    eos_ids,
    generation_bytes,
    load_model,
    resolve_device,
    resolve_dtype,
    resolve_train_dtype,
)
from harness.no_signal import SignalWatch
from harness.records import config_fingerprint
from harness.replay import ReplayEngine, unwrap
from harness.replay_builders import ReplayResult, replay_for
from harness.run_estimate import RunClock
from harness.step_diagnostics import column_names, step_diagnostics
from harness.system import native_bf16, thread_choice
from mrbench_core.replay_kinds import ReplayRequest
from mrbench_core.seeds import SAMPLING, stream_seed
from mrbench_core.text_check import check_examples


class TrainingInterrupted(KeyboardInterrupt):
    """Raised after a checkpoint was written in response to SIGTERM/SIGINT; rerun to resume."""


#: the dtype of the policy's weights, gradients and optimiser state, whatever the compute dtype
MASTER_DTYPE = torch.float32


def _step_seed(seed: int, step: int) -> int:
    return stream_seed(SAMPLING, seed, step)


def replay_head_float32(choice: str, rollout_dtype: torch.dtype) -> bool:
    """``backend.local.replay_head``: the replay statistics' LM head in float32 (``auto``: whenever
    the rollout runs below float32, where the head's rounded outputs add noise to the relevance)."""
    if choice not in ("auto", "float32", "model"):
        raise ValueError(f"backend.local.replay_head: {choice!r}; known: auto, float32, model")
    return choice == "float32" or (choice == "auto" and rollout_dtype != torch.float32)


def exact_replay_batches(choice: str, device: torch.device) -> bool:
    """``backend.local.replay_batching``: padded (the default) or exact. Exact batches take the bf16
    relevance floor to 0 but the replay 15-21% longer on CPU and about twice as long on a GPU
    (bench/README.md), more than the 10% of replay time a default may cost."""
    if choice not in ("exact", "padded"):
        raise ValueError(f"backend.local.replay_batching: {choice!r}; known: exact, padded")
    return choice == "exact"


@BACKENDS.register("local")
class LocalBackend(Backend):
    """In-process trainer on CPU or one GPU (transformers generate, optional vLLM)."""

    name = "local"
    supported_replays = frozenset(ReplayRequest)
    supports_reference = True
    supports_extra_loss = True

    def __init__(self, cfg: RunConfig, task: Any | None = None, algorithm: Any | None = None):
        super().__init__(cfg, task, algorithm)
        self._task = task
        self.device = resolve_device(cfg.model.device)
        self.rollout_dtype = resolve_dtype(cfg.model.dtype, self.device)
        self.train_dtype = resolve_train_dtype(cfg.model.train_dtype, self.device)  # the update's compute dtype
        self.policy: Any = None
        self.rollout_model: Any = None
        self.tokenizer: Any = None
        self._stop: str | None = None
        self._guard: RelevanceGuard | None = None
        self._credit: CreditLog | None = None
        self.reference: Reference | None = None  # the initial policy, when a KL term or the algorithm needs it
        self.update: PolicyUpdate | None = None  # built once the policy is loaded
        self._engine: ReplayEngine | None = None
        self.rollout_attention_name: str | None = None
        self._position = 0  # index of the next training example in the data order
        self._keep_hidden = True
        self.threads_reason: str | None = None  # why this many CPU threads (said at the start, kept in rollout)
        if self.device.type == "cpu":
            threads, self.threads_reason = thread_choice(cfg.backend.local.threads)
            torch.set_num_threads(threads)
        # "auto": vLLM when it imports and CUDA is present; "vllm" where it cannot run raises VLLMError
        self.generator_name = choose_generator(cfg.backend.local.generator, self.rollout_dtype)
        self._vllm: Any = None

    # -- setup ---------------------------------------------------------------------------------
    @property
    def task(self) -> Any:
        if self._task is None:
            from tasks.registry import make_task

            self._task = make_task(self.cfg.task.name, **self.cfg.task.options)
        return self._task

    @task.setter
    def task(self, value: Any) -> None:
        self._task = value

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

    def rollout_info(self) -> dict[str, Any]:
        """How sampling and replay run: precision, attention implementation, CPU threads, and
        whether the host has native bf16 (a slow run explains itself)."""
        return {"dtype": str(self.rollout_dtype).removeprefix("torch."), "attention": self.rollout_attention_name,
                "replay_head": "float32" if self.replay_head_float32() else "model",
                "replay_batching": "exact" if self.exact_replay_batches() else "padded",
                "threads": torch.get_num_threads(), "threads_reason": self.threads_reason,
                "shared_with_training": self.rollout_model is self.policy,
                "host_native_bf16": native_bf16()}

    def update_info(self) -> dict[str, Any]:
        """How the update computes: ``model.train_dtype`` as given and resolved (bf16 mixed precision
        or float32), over float32 master weights and optimiser state."""
        return {"train_dtype": self.cfg.model.train_dtype,
                "compute_dtype": str(self.train_dtype).removeprefix("torch."),
                "master_dtype": str(MASTER_DTYPE).removeprefix("torch."), "host_native_bf16": native_bf16()}

    def replay_head_float32(self) -> bool:
        return replay_head_float32(self.cfg.backend.local.replay_head, self.rollout_dtype)

    def exact_replay_batches(self) -> bool:
        return exact_replay_batches(self.cfg.backend.local.replay_batching, self.device)

    def _rollout_phase(self) -> Any:
        """The context of sampling and replay: the rollout attention on a copy shared with training."""
        if self.rollout_model is self.policy:
            return rollout_attention(self.policy, self.cfg.backend.local.rollout_attention)
        return contextlib.nullcontext()

    def _sync_rollout(self) -> None:
        if self.rollout_model is not self.policy:
            with torch.no_grad():
                self.rollout_model.load_state_dict(self.policy.state_dict())
        if self._vllm is not None:
            with torch.no_grad():
                self._vllm.sync(self.policy)

    @classmethod
    def refuses(cls, cfg: Any, algorithm: Any) -> str | None:
        return vllm_refusal(cfg)

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        return vllm_unavailable(cfg)

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

    def _needs_reference(self) -> bool:
        return self.cfg.optim.kl_coef > 0 or bool(self.algorithm is not None and self.algorithm.needs_reference)

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

    def _eval_model(self) -> None:
        if self.rollout_model is None:  # evaluation only: one copy, in the rollout dtype
            m = self.cfg.model
            loaded = load_model(m.name, dtype=self.rollout_dtype, device=self.device, cache_dir=m.cache_dir)
            self.tokenizer, self.rollout_model = loaded.tokenizer, loaded.model
            self.eos = eos_ids(self.tokenizer, loaded.model)
            self.rollout_attention_name = use_for_rollout(self.rollout_model, self.cfg.backend.local.rollout_attention)

    # -- data ----------------------------------------------------------------------------------
    def _examples_at(self, examples: list[Any], position: int, count: int) -> list[Any]:
        return examples_at(examples, self.cfg.seed, position, count)

    def _fingerprint(self, record: Any) -> str:
        """Of the configuration the record holds (its config.json: the first run's, which a resume
        continues); execution fields (threads) may change on resume."""
        of_record = getattr(record, "config_fingerprint", None)
        return of_record() if of_record is not None else config_fingerprint(self.cfg)

    # -- signals ----------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        self._stop = stop_signal.stop_reason(self._stop, signum)  # one signal, handled once

    # -- the run ------------------------------------------------------------------------------------
    def train(self, record: Any) -> dict[str, Any]:
        from algorithms import get_algorithm
        from tasks.base import Task

        cfg, t_run = self.cfg, time.time()
        if self.algorithm is None:
            self.algorithm = get_algorithm(cfg.algo.name, **cfg.algo.params)
        algo = self.algorithm
        task = self.task
        self._load_policy()
        task.use_tokenizer(self.tokenizer)  # exact prompt lengths for the task's own filters
        examples = task.load(cfg.task.split, cfg.task.data_dir, cfg.task.limit, cfg.seed)
        check_examples(examples, cfg.task.data_dir)  # text no tokenizer takes: refused by file and row
        examples, too_long = fit_prompts(examples, self.tokenizer, cfg.sampling.max_prompt_tokens)
        if not examples:
            raise ValueError(f"task {cfg.task.name!r} loaded no {cfg.task.split!r} examples"
                             + (f" within sampling.max_prompt_tokens={cfg.sampling.max_prompt_tokens} "
                                f"({too_long} longer)" if too_long else ""))
        self.policy.train()
        record.start(seed=cfg.seed, task_version=str(task.version), data_hash=Task.data_hash(examples),
                     extra={"backend": "local", "model_source": self.model_source, "device": str(self.device),
                            "generator": self.generator_name,
                            "rollout_dtype": str(self.rollout_dtype), "rollout": self.rollout_info(),
                            "update": self.update_info(),
                            "prompts_too_long": too_long})
        if self.threads_reason:
            print(f"mrbench: {torch.get_num_threads()} CPU thread(s): {self.threads_reason}")
        if too_long:
            print(f"mrbench: dropped {too_long} of {len(examples) + too_long} prompts longer than "
                  f"sampling.max_prompt_tokens={cfg.sampling.max_prompt_tokens} tokens")
        self._guard = RelevanceGuard(algo, task, record)
        self._guard.at_start(examples, cfg.schedule.steps)
        start = 0
        state = checkpoint.load(record.checkpoint_dir)
        if state is not None:
            known = getattr(record, "config_fingerprints", lambda: [self._fingerprint(record)])()
            if state["fingerprint"] not in known:
                raise RuntimeError(f"{record.checkpoint_dir}: checkpoint of a different configuration")
            checkpoint.load_trainable_state(self.policy, state["model"])
            if "optimizer" in state:
                self.update.optimizer.load_state_dict(state["optimizer"])
            elif int(state["step"]) < cfg.schedule.steps:
                raise checkpoint.CheckpointError(f"{record.checkpoint_dir}: a final checkpoint (no optimiser state) "
                                                 f"after step {state['step']} of {cfg.schedule.steps}; remove it to "
                                                 f"restart the run from step 0")
            checkpoint.set_rng_state(state["rng"])
            start = int(state["step"])
            self._position = int(state["data_position"])
            self._sync_rollout()
        self._start_vllm(record, examples)
        record.truncate_metrics(start)
        watch = SignalWatch(cfg.schedule.no_signal_steps, cfg.schedule.stop_without_signal)
        watch.resume(record.metrics())
        self._credit = CreditLog(cfg.output.credit_groups, record.path, self.tokenizer, task)
        self._credit.resume(start)
        opts = cfg.backend.local
        self._engine = ReplayEngine(self.rollout_model, opts.replay_batch_size, opts.replay_chunk_size,
                                    opts.share_prefix, self.pad_id, temperature=cfg.sampling.temperature,
                                    head_float32=self.replay_head_float32(),
                                    exact_batches=self.exact_replay_batches())
        old_handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        rows: list[dict[str, Any]] = []
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=cfg.schedule.steps, initial=start, desc=f"{cfg.algo.name} on {cfg.task.name}",
                       unit="step", dynamic_ncols=True)
            clock = RunClock(cfg.schedule.steps, algo, start=start, say=bar.write, started=t_run)  # measured
            for n in range(start, cfg.schedule.steps):
                row = self._step(n, examples, record)
                rows.append(row)
                clock.after_step(rows)
                bar.update(1)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", replay=f"{row['replay_share']:.2f}",
                                s=f"{row['time_step']:.0f}")
                every = cfg.schedule.checkpoint_every
                stop_now = watch.after_step(row)
                if (every and (n + 1) % every == 0) or self._stop or n + 1 == cfg.schedule.steps or stop_now:
                    self._save(record, n + 1)
                if stop_now:
                    break
                if self._stop:
                    raise TrainingInterrupted(f"{self._stop}: checkpoint written after step {n + 1}; "
                                              f"rerun the same command to resume")
            bar.close()
        finally:
            for s, h in old_handlers.items():
                signal.signal(s, h)
            if self._vllm is not None:  # the engine's memory goes back before evaluation
                self._vllm.close()
                self._vllm = None
        self.rollout_model.eval()
        if cfg.output.save_model:  # the trained policy to take away: <record>/model/
            record.update_provenance(model=save_model(self._export_source(), self.tokenizer, record.path,
                                                      eos=list(self.eos),
                                                      merged=cfg.output.save_merged))
        return {**run_summary(record.metrics(), time.time() - t_run), **clock.summary(), **self._guard.summary(),
                **watch.summary(), "rollout": self.rollout_info(), "update": self.update_info()}

    def _export_source(self) -> Any:
        """What model/ holds: the weights the run decoded with (its rollout copy, synced after the
        last update; bf16 where it sampled in bf16: half the bytes of the float32 master weights,
        and loaded as it is it decodes as the end-of-run evaluation does); a LoRA policy's adapter."""
        if hasattr(self.policy, "peft_config") or self.rollout_model is self.policy:
            return self.policy
        self._sync_rollout()
        return self.rollout_model

    def _save(self, record: Any, step: int) -> None:
        """The checkpoint after ``step``; after the last one without the optimiser state (no update
        follows, and two thirds of a full fine-tune's bytes are AdamW's moments) unless
        ``output.keep_checkpoint`` keeps it for later."""
        last = step >= self.cfg.schedule.steps and not self.cfg.output.keep_checkpoint
        checkpoint.save(record.checkpoint_dir, step=step, model=self.policy,
                        optimizer=None if last else self.update.optimizer,
                        data_position=self._position, fingerprint=self._fingerprint(record))

    def _step(self, n: int, examples: list[Any], record: Any) -> dict[str, Any]:
        """Training step ``n`` (0-based), top to bottom. The algorithm's part is marked ALGO LOGIC;
        the rest is the plumbing every algorithm shares."""
        cfg, algo, task, s = self.cfg, self.algorithm, self.task, self.cfg.sampling
        phases = PhaseTimes()
        torch.manual_seed(_step_seed(cfg.seed, n))  # an interrupted and resumed run draws the same
        batch_examples = self._examples_at(examples, self._position, s.prompts_per_step)
        self._position += s.prompts_per_step

        # ALGO LOGIC: what the algorithm asks of this step (needs_replay is asked here, once) -------
        plan = plan_step(algo, n)

        # PLUMBING: sample G responses per prompt with the old policy, score them ----------------
        with phases("generate"):
            rollouts = self._sample(batch_examples, n, plan)
        with phases("score"):
            for r in rollouts:
                r.verdicts = task.score_within(r.example, r.text, cfg.task.verifier_timeout_s)
            rewards, group_ids, mask, T = batch_tensors(rollouts)

        # ALGO LOGIC: replay what the algorithm asks, then its token advantages --------------------
        with phases("replay"):
            rep = self._replay(plan, rollouts, rewards, group_ids, T)
        self._guard.after_step(n, rewards, group_ids, plan.replay, rep.pairs_replayed)
        with phases("update"):
            batch = rep.to_batch(rewards, group_ids, mask, n, reward_lows(rollouts, task, rewards.shape[1]),
                                 reward_names=column_names(rollouts), total_steps=cfg.schedule.steps)
            result = step_advantages(algo, batch)

        # PLUMBING: per-token credit of a few groups (credit.jsonl) ------------------------------
        with phases("credit"):
            self._credit.log(n, rollouts, result, rep.relevance)

        # ALGO LOGIC: the policy update (Eq. 3 + KL + entropy + the algorithm's own loss) ---------
        with phases("update"):
            upd = self.update(rollouts, result.tokens, T, algo, rep.teacher_hidden)
            self._sync_rollout()

        # METRICS ROW: the one place the step's row is built ---------------------------------------
        row = step_row(n, rollouts, rewards, mask, result.tokens, rep, upd, result.metrics,
                       getattr(task, "format_reward", None), bool(cfg.optim.entropy_coef),
                       family=getattr(task, "reward_family", None))
        row.update(step_diagnostics(algo, batch, rollouts, self.tokenizer, getattr(task, "reward_family", None),
                                    advantages=result))
        row.update(phases.row())
        record.append_metrics(row)
        record.append_samples(sample_rows(n, rollouts, cfg.schedule.log_samples))
        return row

    # -- the step's pieces ------------------------------------------------------------------------
    def _sample(self, batch_examples: list[Any], n: int, plan: StepPlan) -> list[Any]:
        """G responses per prompt with the rollout model (theta_old). When the replay needs the
        sampling prompt's pass (P_all, x+), the sampler records it, until a replay shows the task's
        P_all is not the prompt (vLLM exposes no hidden states: the replay then recomputes it)."""
        cfg, s = self.cfg, self.cfg.sampling
        self._engine.refresh()  # the rollout weights changed at the last update
        self.rollout_model.eval()
        keep = plan.sampling_prompt_replayed and self._keep_hidden and self._vllm is None
        with self._rollout_phase():
            return rollouts_for(self.rollout_model, self.tokenizer, batch_examples, s.group_size, self.eos, s,
                                s.max_prompt_tokens, keep_hidden=keep, generator=self._vllm,
                                seed=_step_seed(cfg.seed, n), logits_budget=cfg.backend.local.sampling_logits_mb << 20)

    def _replay(self, plan: StepPlan, rollouts: list[Any], rewards: torch.Tensor, group_ids: torch.Tensor,
                T: int) -> ReplayResult:
        """The replay the plan asks for: the rollout model (theta_old), or the reference policy for
        OPSD's teacher; then the sampling pass's hidden states are dropped."""
        if not plan.replay:
            rep = ReplayResult.nothing_replayed(rewards)
        else:
            engine, teacher = self._engine, contextlib.nullcontext()
            if plan.teacher:
                ref = self.update.reference_policy()
                engine = ReplayEngine(ref.model, engine.batch_size, engine.chunk_size, engine.share_prefix,
                                      self.pad_id, temperature=engine.temperature)
                teacher = ref.active()
            with torch.no_grad(), teacher, self._rollout_phase():
                rep = replay_for(plan.request, engine, self.task, self.tokenizer, rollouts, rewards, group_ids, T)
            if rep.sequences and not rep.sampling_hidden_used and any(r.hidden is not None for r in rollouts):
                self._keep_hidden = False  # this task's P_all is not the sampling prompt
        for r in rollouts:
            r.hidden = r.logits = None
        return rep
