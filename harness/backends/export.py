"""The trained policy as a model to take away: ``<record>/model/`` in Hugging Face format.

:func:`save_model` writes the final weights with ``save_pretrained`` (safetensors), the tokenizer
and its chat template (in ``tokenizer_config.json`` and ``chat_template.jinja``), and the
generation config's end-of-turn ids, so that ``AutoModelForCausalLM.from_pretrained``,
``vllm.LLM(model=...)`` and lm-evaluation-harness's ``hf`` model load the directory as it is. A
LoRA policy writes its adapter (``adapter_config.json``, ``adapter_model.safetensors``); with
``merged`` also the base with the adapter merged in, under ``model/merged/``. The weights are in
the dtype the run decoded with (the local backend passes its rollout copy: bf16 where the run
sampled and evaluated in bf16), which ``config.json``'s ``dtype`` and :data:`MANIFEST`'s ``dtype``
say, so that the directory loaded as it is decodes as the run's own evaluation did.

Crash safety: the export is written beside the old ``model/`` (``.model.tmp-<pid>/``), with
:data:`MANIFEST` (every file's size, the kind and the dtype) written last, and swapped in with one
rename (``renameat2(RENAME_EXCHANGE)`` where the file system has it; else the old directory is
renamed aside first, leaving no ``model/`` rather than half of one for that moment). Folders of
an export a dead process left behind are removed by :func:`remove_stale_exports` (the runner calls
it with the record's lock held). :func:`record_model_problem` says why a record's ``model/`` is not
one to load: no model, a run that has not finished, or files missing or cut short.

:func:`file_hashes` gives each file's SHA-256, which the record's ``provenance.json`` keeps under
``model``. :func:`copy_model` fills ``model/`` from a directory another trainer saved (the
openrlhf backend's final weights). :func:`record_model_dir` finds the model of a finished record for
``mrbench eval NAME --model <record>``.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mrbench_core.jsonio import atomic_write_json

MODEL_DIR = "model"
MERGED_DIR = "merged"
MANIFEST = "export.json"  # written last into an export: its files' sizes, kind and dtype
TMP_PREFIX = f".{MODEL_DIR}.tmp-"
OLD_PREFIX = f".{MODEL_DIR}.old-"
AT_FDCWD, RENAME_EXCHANGE = -100, 2


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


@contextlib.contextmanager
def _unwrapped_without_deepspeed() -> Iterator[None]:
    """``save_pretrained`` unwraps the model through accelerate, which imports DeepSpeed wherever it is
    installed (about 1.7 s on a two-core host) to ask whether the model is DeepSpeed's engine. In a
    process that never imported DeepSpeed no object is one, so there accelerate is told it is absent
    for the export's length; where DeepSpeed is loaded (the openrlhf backend), nothing changes."""
    if "deepspeed" in sys.modules:
        yield
        return
    try:
        from accelerate.utils import other
    except ImportError:
        yield
        return
    asked = getattr(other, "is_deepspeed_available", None)
    if asked is None:
        yield
        return
    other.is_deepspeed_available = lambda: False
    try:
        yield
    finally:
        other.is_deepspeed_available = asked


def save_model(policy: Any, tokenizer: Any, record_dir: Path, *, eos: list[int] | None = None,
               merged: bool = False) -> dict[str, Any]:
    """Write ``record_dir/model/`` (see the module docstring); returns what provenance keeps:
    ``{"dir": "model", "kind": "full" | "lora", "dtype": "bfloat16", "files": {path: sha256}}``."""
    target = Path(record_dir) / MODEL_DIR
    tmp = Path(record_dir) / f"{TMP_PREFIX}{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lora = hasattr(policy, "peft_config")
    dtype = _dtype_name(policy)
    was_training = policy.training
    policy.eval()
    from harness.disk_full import guard

    try:
        with guard(tmp, _weight_bytes(policy), "the model export"), _unwrapped_without_deepspeed():
            try:
                if lora:
                    policy.save_pretrained(str(tmp))
                    tokenizer.save_pretrained(str(tmp))
                    if merged:
                        import copy

                        _write_full(copy.deepcopy(policy).merge_and_unload(), tokenizer, tmp / MERGED_DIR, eos)
                else:
                    _write_full(policy, tokenizer, tmp, eos)
                _write_manifest(tmp, "lora" if lora else "full", dtype)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    finally:
        policy.train(was_training)
    _swap_in(tmp, target)
    return {"dir": MODEL_DIR, "kind": "lora" if lora else "full", "dtype": dtype, "files": file_hashes(target)}


def copy_model(source: Path, record_dir: Path) -> dict[str, Any]:
    """``record_dir/model/`` as a copy of a Hugging Face directory another trainer wrote (the
    openrlhf backend's ``checkpoint/openrlhf/final_hf``); returns what provenance keeps, as
    :func:`save_model` does."""
    source, target = Path(source), Path(record_dir) / MODEL_DIR
    if not (source / "config.json").is_file() and not (source / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{source}: no config.json or adapter_config.json, not a saved model")
    tmp = Path(record_dir) / f"{TMP_PREFIX}{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp)
    kind = "full" if (tmp / "config.json").is_file() else "lora"
    dtype = _config_dtype(tmp / "config.json")
    _write_manifest(tmp, kind, dtype)
    _swap_in(tmp, target)
    return {"dir": MODEL_DIR, "kind": kind, "dtype": dtype, "files": file_hashes(target)}


def _dtype_name(model: Any) -> str | None:
    try:
        return str(next(model.parameters()).dtype).removeprefix("torch.")
    except (StopIteration, AttributeError, TypeError):
        return None


def _config_dtype(config: Path) -> str | None:
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("dtype") or data.get("torch_dtype")
    return value if isinstance(value, str) else None


def _weight_bytes(model: Any) -> int:
    try:
        return sum(p.numel() * p.element_size() for p in model.parameters())
    except (AttributeError, TypeError):
        return 0


def _write_manifest(directory: Path, kind: str, dtype: str | None) -> None:
    """:data:`MANIFEST`, last: every file's size (what :func:`record_model_problem` checks), the kind
    and the dtype the weights are in (the eval side reads it)."""
    sizes = {p.relative_to(directory).as_posix(): p.stat().st_size
             for p in sorted(directory.rglob("*")) if p.is_file()}
    atomic_write_json(directory / MANIFEST, {"kind": kind, "dtype": dtype, "files": sizes})


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths with one ``renameat2(RENAME_EXCHANGE)``; False where it is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return renameat2(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), RENAME_EXCHANGE) == 0


def _swap_in(tmp: Path, target: Path) -> None:
    """``tmp`` becomes ``target`` with one rename; the old ``target`` is removed after."""
    if not target.exists():
        os.replace(tmp, target)
        return
    if _exchange(tmp, target):  # tmp now holds the old model
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = target.with_name(f"{OLD_PREFIX}{os.getpid()}")
    os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def remove_stale_exports(record_dir: Path) -> list[Path]:
    """Remove the temporary folders of exports a killed process left in ``record_dir`` (call with the
    record's lock held: no other process is exporting into it)."""
    removed = []
    for path in sorted(Path(record_dir).glob(f"{TMP_PREFIX}*")) + sorted(Path(record_dir).glob(f"{OLD_PREFIX}*")):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def record_model_problem(path: str | Path) -> str | None:
    """Why the run record at ``path`` has no model to load (None: it has one): no ``model/``, a run
    that has not finished, or a ``model/`` with files missing or cut short (against its
    :data:`MANIFEST`, or for an export of an earlier release, the files provenance lists)."""
    root = Path(path)
    model = root / MODEL_DIR
    try:
        prov = json.loads((root / "provenance.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        prov = {}
    if not model.is_dir():
        return "this run record has no model/ (it ran with output.save_model false, or stopped before its export)"
    status = prov.get("status")
    if status != "finished":
        return f"its run has not finished (status {status!r}); rerun its command to finish it first"
    manifest = model / MANIFEST
    if manifest.is_file():
        try:
            expected = json.loads(manifest.read_text(encoding="utf-8")).get("files") or {}
        except ValueError:
            return f"{manifest} is damaged; rerun the export"
        for name, size in expected.items():
            f = model / name
            if not f.is_file():
                return f"model/ is incomplete: {name} is missing"
            if f.stat().st_size != size:
                return f"model/ is incomplete: {name} has {f.stat().st_size} of {size} bytes"
        return None
    listed = (prov.get("model") or {}).get("files") or {}
    missing = [name for name in listed if not (model / name).is_file()]
    if missing:
        return f"model/ is incomplete: {', '.join(sorted(missing)[:3])} missing"
    if not listed and not (model / "config.json").is_file() and not (model / "adapter_config.json").is_file():
        return "model/ holds no config.json or adapter_config.json"
    return None


def record_model_dir(path: str | Path) -> Path | None:
    """The loadable model directory of the run record at ``path`` (``model/``, or ``model/merged/``
    for a LoRA record that has one); None when ``path`` is not a record with a model to load
    (:func:`record_model_problem` says why)."""
    root = Path(path)
    if not (root / "provenance.json").is_file() or record_model_problem(root) is not None:
        return None
    model = root / MODEL_DIR
    if (model / "config.json").is_file():
        return model
    if (model / MERGED_DIR / "config.json").is_file():
        return model / MERGED_DIR
    return model
