"""The trained policy as a model to take away: ``<record>/model/`` in Hugging Face format.

:func:`save_model` writes the final weights with ``save_pretrained`` (safetensors), the tokenizer
and its chat template (in ``tokenizer_config.json`` and ``chat_template.jinja``), and the
generation config's end-of-turn ids, so that ``AutoModelForCausalLM.from_pretrained``,
``vllm.LLM(model=...)`` and lm-evaluation-harness's ``hf`` model load the directory as it is. A
LoRA policy writes its adapter (``adapter_config.json``, ``adapter_model.safetensors``); with
``merged`` also the base with the adapter merged in, under ``model/merged/``. The directory is
written to a temporary sibling and renamed, so an interrupted save leaves no half a model.

:func:`file_hashes` gives each file's SHA-256, which the record's ``provenance.json`` keeps under
``model``. :func:`copy_model` fills ``model/`` from a directory another trainer saved (the
openrlhf backend's final weights). :func:`record_model_dir` finds the model of a finished record for
``mrbench eval NAME --model <record>``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

MODEL_DIR = "model"
MERGED_DIR = "merged"


def file_hashes(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root``, sorted by path."""
    out = {}
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        out[path.relative_to(root).as_posix()] = digest.hexdigest()
    return out


def _write_full(model: Any, tokenizer: Any, target: Path, eos: list[int] | None) -> None:
    model.save_pretrained(str(target), safe_serialization=True)
    tokenizer.save_pretrained(str(target))
    if eos and getattr(model, "generation_config", None) is not None:
        config = model.generation_config
        config.eos_token_id = eos if len(eos) > 1 else eos[0]
        config.save_pretrained(str(target))


def save_model(policy: Any, tokenizer: Any, record_dir: Path, *, eos: list[int] | None = None,
               merged: bool = False) -> dict[str, Any]:
    """Write ``record_dir/model/`` (see the module docstring); returns what provenance keeps:
    ``{"dir": "model", "kind": "full" | "lora", "files": {path: sha256}}``."""
    target = Path(record_dir) / MODEL_DIR
    tmp = Path(record_dir) / f".{MODEL_DIR}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lora = hasattr(policy, "peft_config")
    was_training = policy.training
    policy.eval()
    try:
        if lora:
            policy.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
            if merged:
                import copy

                _write_full(copy.deepcopy(policy).merge_and_unload(), tokenizer, tmp / MERGED_DIR, eos)
        else:
            _write_full(policy, tokenizer, tmp, eos)
    finally:
        policy.train(was_training)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return {"dir": MODEL_DIR, "kind": "lora" if lora else "full", "files": file_hashes(target)}


def copy_model(source: Path, record_dir: Path) -> dict[str, Any]:
    """``record_dir/model/`` as a copy of a Hugging Face directory another trainer wrote (the
    openrlhf backend's ``checkpoint/openrlhf/final_hf``); returns what provenance keeps, as
    :func:`save_model` does."""
    source, target = Path(source), Path(record_dir) / MODEL_DIR
    if not (source / "config.json").is_file() and not (source / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{source}: no config.json or adapter_config.json, not a saved model")
    tmp = Path(record_dir) / f".{MODEL_DIR}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    kind = "full" if (target / "config.json").is_file() else "lora"
    return {"dir": MODEL_DIR, "kind": kind, "files": file_hashes(target)}


def record_model_dir(path: str | Path) -> Path | None:
    """The loadable model directory of the run record at ``path`` (``model/``, or ``model/merged/``
    for a LoRA record that has one); None when ``path`` is not a record with a saved model."""
    root = Path(path)
    if not (root / "provenance.json").is_file() or not (root / MODEL_DIR).is_dir():
        return None
    model = root / MODEL_DIR
    if (model / "config.json").is_file():
        return model
    if (model / MERGED_DIR / "config.json").is_file():
        return model / MERGED_DIR
    return model
