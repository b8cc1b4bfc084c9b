"""Greedy generation for ``mrbench eval NAME --model M``, through the configured backend.

``--model`` may name a finished run record: its saved model (``<record>/model/``) is evaluated,
by default with the record's own end-of-run evaluation settings (:func:`record_eval_settings`:
cases, longest response, benchmark data, and the precision, attention and device it decoded
with), so that ``mrbench eval BENCH --model RECORD`` reproduces the record's ``eval.json`` on the
same prompts; each flag given overrides its setting. Otherwise the run config is resolved as
``mrbench run`` resolves it (defaults, ``--config`` recipe, overrides), with the model set to M,
so the backend and its options (device, precision, attention) are the ones a training run of that
recipe would use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evals.runner import Generate
from harness.config import resolve


class ModelArgError(ValueError):
    """``--model`` names a run record that has no saved model; the message says why."""


def model_from_record(model: str) -> str:
    """``--model`` as given, or, when it names a run record directory, that record's saved model
    (``<record>/model/``, written by ``output.save_model``)."""
    from harness.backends.export import record_model_dir, record_model_problem

    path = Path(model)
    if not (path / "provenance.json").is_file():
        return model
    problem = record_model_problem(path)
    if problem is not None:
        raise ModelArgError(f"--model {model}: {problem}")
    return str(record_model_dir(path))


@dataclass
class RecordEvalSettings:
    """How a run record's end-of-run evaluation ran (its ``config.json``, ``provenance.json`` and
    ``eval.json``): what ``mrbench eval --model RECORD`` uses unless told otherwise."""

    limit: int | None
    max_new_tokens: int | None
    data_dir: str | None
    dtype: str | None  # as it decoded ("bfloat16"), not as configured ("auto")
    attention: str | None  # backend.local.rollout_attention as configured
    device: str | None
    backend: str | None

    def overrides(self) -> list[tuple[str, str]]:
        """The config fields these settings set for the generating backend."""
        out = [("model.dtype", self.dtype)] if self.dtype else []
        if self.attention:
            out.append(("backend.local.rollout_attention", self.attention))
        if self.device:
            out.append(("model.device", self.device))
        return out

    def describe(self) -> str:
        cases = f"{self.limit} cases" if self.limit is not None else "every case"
        tokens = (f"at most {self.max_new_tokens} new tokens" if self.max_new_tokens
                  else "each benchmark's own response length")
        return (f"{cases}, {tokens}, {self.dtype or 'the configured precision'}, attention "
                f"{self.attention or 'auto'}")


def record_eval_settings(model: str) -> RecordEvalSettings | None:
    """The end-of-run evaluation settings of the run record ``model`` names, or None when it names
    no record. The precision is the one the run decoded with (``provenance.json``'s ``rollout``,
    else ``eval.json``'s ``decoding``), so an ``auto`` that resolved to bf16 is bf16 again here."""
    from harness.records import read_json

    path = Path(model)
    if not (path / "provenance.json").is_file() or not (path / "config.json").is_file():
        return None
    config, provenance = read_json(path / "config.json"), read_json(path / "provenance.json")
    decoded = read_json(path / "eval.json").get("decoding") or {} if (path / "eval.json").is_file() else {}
    if not decoded.get("dtype"):  # a record written before eval.json said how it decoded
        decoded = provenance.get("rollout") or {}
    schedule, model_cfg = config.get("schedule", {}), config.get("model", {})
    dtype = decoded.get("dtype") or provenance.get("rollout_dtype") or model_cfg.get("dtype")
    if isinstance(dtype, str):
        dtype = dtype.removeprefix("torch.")
    return RecordEvalSettings(limit=schedule.get("eval_limit"), max_new_tokens=schedule.get("eval_max_new_tokens"),
                              data_dir=schedule.get("eval_data_dir"), dtype=dtype,
                              attention=config.get("backend", {}).get("local", {}).get("rollout_attention"),
                              device=model_cfg.get("device"), backend=config.get("backend", {}).get("name"))


def backend_generate(model: str, *, backend: str | None = None, config: str | None = None,
                     overrides: Sequence[tuple[str, str]] = ()) -> Generate:
    """A ``generate(messages_list, max_new_tokens)`` from the configured backend's ``generate``."""
    from harness.backends import BACKENDS

    pairs = [("model", model_from_record(model)), *overrides] + ([("backend", backend)] if backend else [])
    cfg = resolve(config, pairs)
    instance = BACKENDS.get(cfg.backend.name)(cfg)
    return instance.generate
