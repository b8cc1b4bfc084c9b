"""Greedy generation for ``mrbench eval NAME --model M``, through the configured backend.

``--model`` may name a finished run record: its saved model (``<record>/model/``) is evaluated.
The run config is resolved as ``mrbench run`` resolves it (defaults, ``--config`` recipe,
overrides), with the model set to M, so the backend and its options (device, precision,
attention) are the ones a training run of that recipe would use.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.runner import Generate
from harness.config import resolve


class ModelArgError(ValueError):
    """``--model`` names a run record that has no saved model; the message says why."""


def model_from_record(model: str) -> str:
    """``--model`` as given, or, when it names a run record directory, that record's saved model
    (``<record>/model/``, written by ``output.save_model``)."""
    from harness.backends.export import record_model_dir

    path = Path(model)
    if not (path / "provenance.json").is_file():
        return model
    found = record_model_dir(path)
    if found is None:
        raise ModelArgError(f"--model {model}: this run record has no model/ (it ran with output.save_model "
                            f"false, or has not finished)")
    return str(found)


def backend_generate(model: str, *, backend: str | None = None, config: str | None = None,
                     overrides: Sequence[tuple[str, str]] = ()) -> Generate:
    """A ``generate(messages_list, max_new_tokens)`` from the configured backend's ``generate``."""
    from harness.backends import BACKENDS

    pairs = [("model", model_from_record(model)), *overrides] + ([("backend", backend)] if backend else [])
    cfg = resolve(config, pairs)
    instance = BACKENDS.get(cfg.backend.name)(cfg)
    return instance.generate
