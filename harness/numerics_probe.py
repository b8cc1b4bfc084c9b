"""The numerics probe: one fixed, tiny, seeded training step through the local backend's real code
path, and a hash of what it computed.

The step: MRTPO (replaying every step) on :class:`ProbeTask` (4 prompts, 3 verifiable rewards on
the random model's bytes), the ``tiny-random`` model, 2 prompts x 4 responses of at most 12 tokens,
one update at lr 0.01, seed 0, one CPU thread; ``backend(cfg, task, algorithm).train(record)``
into a temporary record, as a run trains, where ``backend`` is the class it is given: the local
backend (:class:`harness.backends.local.LocalBackend`, which passes itself; this module imports no
backend). It runs twice, with sampling, replay and update in float32 and in bfloat16, and each
run's digest hashes, in order:

- every response text the task scored and its rewards (the sampled tokens, as the verifiers see them);
- for every call of the algorithm's ``advantages(batch)``: the batch's rewards, group ids and
  response mask, the replay's relevance, and the token advantages returned;
- the policy's weights after the update.

So a change that moves any of these numbers by one bit on this device moves the digest.
:mod:`harness.fingerprint` turns the two digests into a fingerprint
(:func:`harness.numerics.fingerprint_of`) and caches it.

This file uses only what the local backend has offered since the first committed reference
(``harness.config.from_dict``, ``LocalBackend(cfg, task, algorithm).train(record)``,
``RunRecord.open``, ``algorithms.get_algorithm`` and ``tasks.base``), so that
``scripts/numerics_afterwards.py`` can run it, unchanged, inside a checkout of an older commit: it
loads this file with ``runpy.run_path`` there and calls its :func:`digests` with that checkout's
``LocalBackend``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import tempfile
from typing import Any

#: raise when the probe's procedure changes (a cached fingerprint of another procedure is not used)
PROBE_VERSION = 1
#: the precisions the step runs in, each its own digest
DTYPES = ("float32", "bfloat16")
TASK_NAME = "numerics-probe"
#: set while the probe's own run trains, so that the run it makes computes no fingerprint itself
PROBING_ENV = "MRBENCH_NUMERICS_PROBING"
RULES = {"printable": "Write only printable characters.", "short": "Answer in fewer than 6 characters.",
         "vowel": "Use a vowel."}


def _task_class() -> type:
    """:class:`ProbeTask`, built on first use (so that importing this module imports no task code)."""
    from tasks.base import Example, Task, Verdict

    class ProbeTask(Task):
        """Four fixed prompts; rewards: the share of printable characters, a short answer, a vowel
        (the last only on even prompts, so K varies). Every verdict carries its rule as its block,
        so that MRTPO replays every reward. Keeps what it scored, in order (``scored``)."""

        name = TASK_NAME
        version = "1"
        format_reward = "printable"

        def __init__(self) -> None:
            self.scored: list[tuple[str, str, list[float]]] = []

        def load(self, split: str = "train", data_dir: Any = None, limit: Any = None, seed: Any = 0) -> list[Any]:
            # (limit and seed: the signature of releases before the harness applied them itself)
            out = []
            for i in range(4):
                names = ["printable", "short"] + (["vowel"] if i % 2 == 0 else [])
                rules = " ".join(RULES[n] for n in names)
                out.append(Example(id=f"probe-{i}", reward_names=names,
                                   messages=[{"role": "user", "content": f"Prompt {i}: greet me. {rules}"}]))
            return out

        def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: Any = None) -> Any:
            return Example(id=str(row["id"]), messages=row["messages"], reward_names=list(row["reward_names"]))

        def score(self, example: Any, response: str) -> list[Any]:
            out = []
            for name in example.reward_names:
                if name == "printable":
                    value = sum(32 <= ord(c) < 127 for c in response) / max(1, len(response))
                    spans = [(0, len(response))] if response else []
                elif name == "short":
                    value, spans = float(len(response) < 6), [(0, len(response))] if response else []
                else:
                    spans = [(i, i + 1) for i, c in enumerate(response) if c in "aeiouAEIOU"]
                    value = float(bool(spans))
                out.append(Verdict(name, float(value), name, RULES[name], spans=spans))
            self.scored.append((example.id, response, [v.value for v in out]))
            return out

    return ProbeTask


def _config(out_dir: str, dtype: str, device: str) -> Any:
    """The probe's run config; fields a commit may lack are set only where it has them."""
    from harness.config import from_dict

    cfg = from_dict({
        "task": {"name": TASK_NAME}, "algo": {"name": "mrtpo", "params": {"warmup_steps": 0}},
        "model": {"name": "tiny-random", "dtype": dtype, "device": device},
        "sampling": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 12},
        "optim": {"lr": 1e-2, "micro_batch_size": 3},
        "schedule": {"steps": 1, "log_samples": 0},
        "output": {"dir": out_dir}, "seed": 0,
    })
    for section, name, value in (("model", "train_dtype", dtype), ("backend.local", "threads", 1),
                                 ("task", "verifier_timeout_s", 0.0), ("output", "credit_groups", 0),
                                 ("output", "save_model", False), ("schedule", "checkpoint_every", 0)):
        node = cfg
        for part in section.split("."):
            node = getattr(node, part, None)
        if node is not None and hasattr(node, name):
            setattr(node, name, value)
    return cfg


def _update(h: Any, label: str, value: Any) -> None:
    """Fold one named value (a tensor, or anything JSON writes) into the hash ``h``."""
    import torch

    h.update(label.encode() + b"\0")
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        h.update(f"{tuple(t.shape)}:{t.dtype}".encode())
        h.update((t.float() if t.is_floating_point() else t.long()).contiguous().numpy().tobytes())
    else:
        h.update(json.dumps(value, sort_keys=True, default=str).encode())


@contextlib.contextmanager
def _isolated(device: str) -> Any:
    """The probe leaves the process as it found it (the RNG states, the CPU thread count) and
    prints nothing; :data:`PROBING_ENV` is set meanwhile."""
    import torch

    threads = torch.get_num_threads()
    python_rng = random.getstate()
    probing = os.environ.get(PROBING_ENV)
    os.environ[PROBING_ENV] = "1"
    dev = torch.device(device)
    gpus = [dev.index if dev.index is not None else torch.cuda.current_device()] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=gpus), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        try:
            yield
        finally:
            torch.set_num_threads(threads)
            random.setstate(python_rng)
            if probing is None:
                os.environ.pop(PROBING_ENV, None)


def digest(dtype: str, device: str, backend_class: type) -> str:
    """The hex digest of one probe step of ``backend_class`` in ``dtype`` on ``device`` (see the
    module docstring)."""
    from algorithms import get_algorithm
    from harness.records import RunRecord

    with _isolated(device), tempfile.TemporaryDirectory(prefix="mrbench-probe-") as tmp:
        cfg = _config(tmp, dtype, device)
        task = _task_class()()
        algorithm = get_algorithm("mrtpo", warmup_steps=0)
        seen: list[tuple[Any, Any]] = []
        advantages = algorithm.advantages

        def recorded(batch: Any) -> Any:
            out = advantages(batch)
            seen.append((batch, out))
            return out

        algorithm.advantages = recorded
        backend = backend_class(cfg, task=task, algorithm=algorithm)
        record = RunRecord.open(cfg)
        try:
            backend.train(record)
        finally:
            record.unlock()
        h = hashlib.sha256()
        _update(h, "scored", task.scored)
        for i, (batch, out) in enumerate(seen):
            for name in ("rewards", "group_ids", "response_mask", "relevance"):
                if getattr(batch, name, None) is not None:
                    _update(h, f"{i}.{name}", getattr(batch, name))
            _update(h, f"{i}.advantages", getattr(out, "tokens", out))
        for name, param in sorted(backend.policy.named_parameters()):
            _update(h, f"weights.{name}", param)
    return h.hexdigest()


def digests(device: str, backend_class: type) -> dict[str, str]:
    """One digest of ``backend_class``'s probe step on ``device`` per precision of :data:`DTYPES`."""
    return {dtype: digest(dtype, device, backend_class) for dtype in DTYPES}
