"""The ``openrlhf`` backend: one cell trained by OpenRLHF with mrbench's algorithms and verifiers.

``train(record)``, in the mrbench process (no OpenRLHF import here):

1. runs the run's prologue with the policy's tokenizer, as every backend does
   (:meth:`harness.training.step.Step.open`: the examples loaded and checked, prompts over
   ``sampling.max_prompt_tokens`` dropped, the record started, the relevance guard's look at the
   start);
2. writes the prompt file in the local backend's order (:mod:`.prompts`) and the cell file
   (:mod:`.cell`);
3. runs OpenRLHF (:mod:`.launch`): the entry point :mod:`.main` installs mrbench's experience
   maker, policy actor and trainer (:mod:`.trainer`), then runs OpenRLHF's own
   ``train_ppo_ray`` with the flags of :mod:`.argv`. The vLLM engines sample and score with
   mrbench's verifiers (:mod:`.agent`); the experience maker replays on the policy actors and
   writes the algorithm's token advantages into OpenRLHF's frame; OpenRLHF updates the policy;
   the trainer appends each step's metrics and sample rows to this record;
4. returns the run summary from the metrics.

Rerunning the same command resumes from OpenRLHF's last checkpoint (``--ckpt.load_enable``;
``schedule.checkpoint_every`` steps apart), and the trainer drops metrics rows after it. After
training, ``generate`` answers with the final weights through the local backend's generator.
"""

from __future__ import annotations

import os
import time
from typing import Any

from harness.backends import BACKENDS
from harness.backends.base import Backend, BackendRunError
from harness.backends.honours import STEP_FIELDS
from harness.backends.openrlhf import checks
from harness.backends.openrlhf.argv import (
    ENTRYPOINT,
    launch_command,
    openrlhf_argv,
    placement,
    precision,
    runtime_env,
    shell_line,
)
from harness.backends.openrlhf.cell import CellPaths, CellSpec
from harness.backends.openrlhf.launch import clear_stop, run_process
from harness.backends.openrlhf.prompts import load_tokenizer, model_source, stop_ids, write_prompts
from mrbench_core.replay_kinds import ReplayRequest

#: environment variables the OpenRLHF processes need as the mrbench process has them
FORWARDED_ENV = ("MRBENCH_DATA_DIR", "MRBENCH_MODEL_CACHE", "HF_HOME", "HF_HUB_OFFLINE")


def verifier_budget(cfg: Any) -> str:
    """How the vLLM engines' agent scores (the dry run's line)."""
    seconds = cfg.task.verifier_timeout_s
    if not seconds:
        return "task.verifier_timeout_s 0: no time budget"
    from mrbench_core.time_budget import wall_cap

    return (f"task.verifier_timeout_s {seconds:g} s of CPU time per response (at most {wall_cap(seconds):g} s of "
            f"wall-clock time), in the vLLM engines' worker threads: each response is scored in a worker process "
            f"that is killed past the budget (reason 'timeout')")


class OpenRLHFRunError(BackendRunError):
    """The OpenRLHF process ended without finishing the run; the message names the cause and its log."""


@BACKENDS.register("openrlhf")
class OpenRLHFBackend(Backend):
    """OpenRLHF 0.11: Ray actors, vLLM rollouts, DeepSpeed updates, one GPU to a cluster."""

    name = "openrlhf"
    supported_replays = frozenset({ReplayRequest.NONE, ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.JOINT,
                                   ReplayRequest.RUBRIC, ReplayRequest.READ_SPANS, ReplayRequest.TOKEN_IDS,
                                   ReplayRequest.FEEDBACK})
    supports_reference = False
    supports_extra_loss = False
    #: what it leaves out, and why: checks.NOT_HONOURED; the dtypes it honours: checks.dtype_refusals
    honours = STEP_FIELDS | frozenset({
        "model.name", "model.dtype", "model.train_dtype", "model.lora", "model.lora_r", "model.lora_alpha",
        "model.lora_dropout", "model.gradient_checkpointing", "model.cache_dir",
        "backend.openrlhf", "backend.local.generator", "backend.local.vllm_gpu_memory_utilization",
        "backend.local.rollout_attention", "backend.local.threads",  # the end-of-run evaluation's generator
        "replay",  # on the policy actors
        "sampling.group_size", "sampling.temperature", "sampling.top_p", "sampling.top_k", "sampling.max_new_tokens",
        "optim.lr", "optim.betas", "optim.weight_decay", "optim.grad_clip", "optim.micro_batch_size",
        "optim.mini_batches", "optim.clip_low", "optim.clip_high", "optim.kl_coef", "optim.entropy_coef",
        "schedule.checkpoint_every", "schedule.no_signal_steps",  # OpenRLHF's own loop: its checkpoints, the watch
        "output.save_model"})

    def __init__(self, cfg: Any, task: Any | None = None, algorithm: Any | None = None):
        super().__init__(cfg, task, algorithm)
        self._paths: CellPaths | None = None
        self._generator: Any = None

    # -- what it refuses --------------------------------------------------------------------------
    @classmethod
    def unsupported(cls, algorithm: Any) -> str | None:
        if algorithm.has_loss:
            return (f"backend 'openrlhf' cannot add {algorithm.name}'s own loss term (it would need OpenRLHF's "
                    f"actor loss changed, which this backend does not patch); run it with --backend local")
        if ReplayRequest(algorithm.replay_request) is ReplayRequest.ENTROPY:
            return (f"backend 'openrlhf' cannot supply {algorithm.name}'s old-policy entropy (OpenRLHF 0.11's "
                    f"experience maker returns the old policy's log-probabilities only, and this backend does not "
                    f"patch it); run it with --backend local")
        return super().unsupported(algorithm)

    @classmethod
    def ignored(cls, cfg: Any) -> list[str]:
        named = [f"{entry} ({why})" if (why := checks.reason(entry.split("=", 1)[0])) else entry
                 for entry in super().ignored(cfg)]
        return named + checks.dtype_refusals(cfg)

    @classmethod
    def refuses(cls, cfg: Any, algorithm: Any) -> str | None:
        return checks.refusal(cfg, algorithm)

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        return checks.missing(cfg)

    # -- the launch ---------------------------------------------------------------------------------
    def _environment(self, paths: CellPaths) -> dict[str, str]:
        forwarded = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
        env = runtime_env(paths, forwarded)["env_vars"]
        address = self.cfg.backend.openrlhf.address or ""
        if address and not address.startswith(("http://", "https://")):
            env["RAY_ADDRESS"] = address
        return env

    def dry_run(self) -> str:
        from harness.records import record_dir_for

        cfg = self.cfg
        paths = CellPaths(record_dir_for(cfg).resolve())
        command = launch_command(cfg, paths, openrlhf_argv(cfg, paths, model_source(cfg, convert=False)))
        env = self._environment(paths)
        lines = ["OpenRLHF command line:", "  " + shell_line(command), "", "environment:"]
        lines += [f"  {k}={v}" for k, v in sorted(env.items())]
        lines += ["", "precision:", *("  " + line for line in precision(cfg).lines(cfg))]
        lines += ["", "verifiers:", "  " + verifier_budget(cfg)]
        lines += ["", "placement:", *("  " + line for line in placement(cfg)), "", "files:",
                  f"  prompts (written by train): {paths.prompts}", f"  cell: {paths.cell}",
                  f"  checkpoints: {paths.checkpoints}", f"  log: {paths.log}"]
        return "\n".join(lines)

    # -- training -------------------------------------------------------------------------------------
    def train(self, record: Any) -> dict[str, Any]:
        from harness.no_signal import SignalWatch
        from harness.training.step import Step
        from harness.training.step_metrics import run_summary

        cfg, t_run = self.cfg, time.time()
        task, algorithm = self.run_objects()
        paths = self._paths = CellPaths(record.path.resolve())
        source = model_source(cfg)
        tokenizer = load_tokenizer(source)
        command = launch_command(cfg, paths, openrlhf_argv(cfg, paths, source))
        _, examples = Step.open(cfg, task, algorithm, record, tokenizer, extra={
            "backend": self.name, "model_source": source, "numerics": self._numerics(cfg),
            "openrlhf": {"command": shell_line(command), "placement": placement(cfg), "precision": precision(cfg).lines(cfg)}})
        write_prompts(paths.prompts, cfg, examples, tokenizer, stop_ids(tokenizer, source))
        CellSpec(config=cfg.to_dict(), record_dir=str(paths.record)).write()
        clear_stop(paths)
        outcome = run_process(command, {**os.environ, **self._environment(paths)}, paths)
        done = len(record.metrics())
        if outcome.signal is not None:
            from harness.training.run_loop import TrainingInterrupted

            where = (f"checkpoint written after step {outcome.stopped_after}" if outcome.stopped_after is not None
                     else f"OpenRLHF ended before a checkpoint (exit code {outcome.returncode}); the last periodic "
                          f"one stands")
            raise TrainingInterrupted(f"{outcome.signal}: {where}; rerun the same command to resume")
        if outcome.returncode != 0 or done < cfg.schedule.steps:
            from harness.backends.openrlhf.failures import cause_in_log

            cause = cause_in_log(paths.log)
            raise OpenRLHFRunError(f"OpenRLHF ({ENTRYPOINT}) exited with code {outcome.returncode} after "
                                   f"{done} of {cfg.schedule.steps} steps" + (f": {cause}" if cause else "")
                                   + f"; its output: {paths.log}")
        watch = SignalWatch(cfg.schedule.no_signal_steps)  # the trainer's rows, read back: warns here
        for row in record.metrics():
            watch.after_step(row)
        if cfg.output.save_model and paths.final_weights.is_dir():  # the trained policy to take away
            from harness.backends.export import copy_model

            record.update_provenance(model=copy_model(paths.final_weights, record.path))
        return {**run_summary(record.metrics(), time.time() - t_run), **watch.summary(), "backend": self.name}

    @staticmethod
    def _numerics(cfg: Any) -> dict[str, Any]:
        """The record's numerics block: the device the driver sees, the dtypes, no fingerprint (the
        numbers come from OpenRLHF and vLLM on the Ray workers, which the local probe does not run)."""
        import torch

        from harness.numerics import measured

        p = precision(cfg)
        return measured("cuda" if torch.cuda.is_available() else "cpu",
                        {"rollout": p.rollout_dtype, "update": p.train_dtype}, {"generator": "vllm", "backend": "openrlhf"},
                        unprobed="OpenRLHF's and vLLM's arithmetic on the Ray workers, which the local probe does "
                                 "not run")

    # -- generation ---------------------------------------------------------------------------------
    def generate(self, messages_list: list[list[dict[str, str]]], max_new_tokens: int,
                 greedy: bool = True) -> list[str]:
        """Greedy responses with the trained weights (``checkpoint/openrlhf/final_hf``) once ``train``
        has run, else with the configured model, through the local backend's generator."""
        return self._local_generator().generate(messages_list, max_new_tokens)

    def generation_bytes(self, messages: list[dict[str, str]], max_new_tokens: int, batch: int) -> int:
        """What one evaluation case costs in memory (:mod:`evals.eval_budget`), from the local generator."""
        return self._local_generator().generation_bytes(messages, max_new_tokens, batch)

    def memory_available(self) -> int | None:
        return self._local_generator().memory_available()

    def rollout_info(self) -> dict[str, Any]:
        """How the evaluation decodes (the local generator's precision, attention, threads); empty
        before anything was generated."""
        return self._generator.rollout_info() if self._generator is not None else {}

    def _local_generator(self) -> Any:
        if self._generator is None:
            from harness.backends.local import LocalBackend
            from harness.config import from_dict

            data = self.cfg.to_dict()
            final = self._paths.final_weights if self._paths is not None else None
            if final is not None and (final / "config.json").exists():
                data["model"] = {**data["model"], "name": str(final), "lora": False}
            elif final is not None and (final / "adapter_config.json").exists():
                data["model"] = {**data["model"], "name": str(final)}  # transformers loads base + adapter
            data["backend"] = {"name": "local", "local": data["backend"]["local"]}
            self._generator = LocalBackend(from_dict(data))
        return self._generator
