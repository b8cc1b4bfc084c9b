"""The trained policy to take away: ``output.save_model`` writes ``<record>/model/`` in Hugging Face
format; transformers and lm-evaluation-harness's ``hf`` model load it with the final policy's logits,
and ``mrbench eval NAME --model <record>`` evaluates it (the vLLM load is checked in
tests/test_vllm_engine.py)."""

from __future__ import annotations

import json

import pytest
import torch
from toy_task import tiny_config, train_run

from harness import cli
from harness.backends import checkpoint
from harness.backends.export import file_hashes, record_model_dir
from harness.models import cast_weights, chat_prompt_ids, load_model


def _train(cfg):
    return train_run(cfg, finish=True)[:2]


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def test_run_writes_a_loadable_model_with_the_final_logits(trained):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = trained("grpo", steps=1)
    backend, rec = run.backend, run.record
    model_dir = rec.path / "model"
    loaded = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    messages = [{"role": "user", "content": "Task 1: say hi."}]
    ids = chat_prompt_ids(tok, messages)
    assert ids == chat_prompt_ids(backend.tokenizer, messages)  # tokenizer and chat template travel with it
    final = _logits(backend.policy.eval(), ids)
    # the policy trains with its own attention implementation (backend.local.train_attention);
    # under the same one the saved weights give the same logits bit for bit, under sdpa to rounding
    assert torch.allclose(_logits(loaded, ids), final, atol=1e-5, rtol=1e-5)  # float32 rounding: 1.0e-5 of 11.6 seen
    loaded.set_attn_implementation(backend.policy.config._attn_implementation)
    assert torch.equal(_logits(loaded, ids), final)
    start = load_model("tiny-random", dtype="float32").model
    assert not torch.allclose(_logits(start, ids), final)  # it is the trained policy, not the initial one
    assert json.loads((model_dir / "generation_config.json").read_text())["eos_token_id"] in (
        backend.eos[0], list(backend.eos))
    saved = rec.provenance()["model"]
    assert saved["dir"] == "model" and saved["kind"] == "full" and saved["files"] == file_hashes(model_dir)
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= set(saved["files"])
    assert record_model_dir(rec.path) == model_dir


def test_save_model_false_writes_none_and_eval_says_so(tmp_path, capsys):
    _, rec = _train(tiny_config(str(tmp_path / "run"), "grpo", steps=1, output__save_model=False))
    assert not (rec.path / "model").exists() and "model" not in rec.provenance()
    capsys.readouterr()  # the training's progress bar
    code = cli.main(["eval", "ifollow-heldout", "--model", str(rec.path), "--limit", "1", "--out", str(tmp_path / "e")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "has no model/" in err and "output.save_model" in err


def test_lora_saves_the_adapter_and_a_merged_copy_with_the_same_logits(tmp_path):
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    backend, rec = _train(tiny_config(str(tmp_path / "run"), "grpo", steps=1, model__lora=True, model__lora_r=4,
                                      output__save_merged=True))
    model_dir = rec.path / "model"
    assert (model_dir / "adapter_config.json").exists() and (model_dir / "adapter_model.safetensors").exists()
    merged = AutoModelForCausalLM.from_pretrained(model_dir / "merged", dtype=torch.float32).eval()
    ids = chat_prompt_ids(backend.tokenizer, [{"role": "user", "content": "Task 2: say hi."}])
    # merging re-associates float32 sums: equal to rounding
    assert torch.allclose(_logits(merged, ids), _logits(backend.policy.eval(), ids), atol=1e-3, rtol=1e-4)
    assert rec.provenance()["model"]["kind"] == "lora" and "merged/model.safetensors" in rec.provenance()["model"]["files"]
    assert record_model_dir(rec.path) == model_dir / "merged"


def test_sweeps_save_no_model_unless_the_grid_sets_it(tmp_path):
    from harness.sweep.grid import expand, load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text("grid: {seed: [0, 1]}\nset: {model: tiny-random}\n")
    assert [c.cfg.output.save_model for c in expand(load_grid(grid))] == [False, False]
    grid.write_text("grid: {seed: [0]}\nset: {model: tiny-random, output.save_model: true}\n")
    assert [c.cfg.output.save_model for c in expand(load_grid(grid))] == [True]
    from harness.config import from_dict

    assert from_dict({}).output.save_model is True  # mrbench run's default


def test_cli_run_then_eval_the_records_model_and_lm_eval_loads_it(tmp_path, capsys):
    """The issue's acceptance: ``mrbench run --model tiny-random --schedule.steps 1`` writes
    ``<record>/model/`` with the final policy's weights (the kept checkpoint holds them) in the dtype
    the run decoded with (``export.json`` says which: bf16 on a host that computes it natively), and
    ``mrbench eval ifollow-heldout --model <record>`` runs on it."""
    from transformers import AutoModelForCausalLM

    args = ["run", "--model", "tiny-random", "--schedule.steps", "1", "--output.root", str(tmp_path),
            "--sampling.prompts_per_step", "1", "--sampling.group_size", "2", "--sampling.max_new_tokens", "8",
            "--schedule.eval_limit", "1", "--schedule.eval_max_new_tokens", "4", "--output.keep_checkpoint", "true"]
    assert cli.main(args) == 0
    record = tmp_path / "ifollow" / "mrtpo" / "tiny-random" / "seed0"
    final = load_model("tiny-random", dtype="float32").model
    checkpoint.load_trainable_state(final, checkpoint.load(record / "checkpoint")["model"])
    dtype = getattr(torch, json.loads((record / "model" / "export.json").read_text())["dtype"])
    final = cast_weights(cast_weights(final, dtype), torch.float32)  # the saved weights, read in float32
    loaded = AutoModelForCausalLM.from_pretrained(record / "model", dtype=torch.float32).eval()
    ids = list(range(40, 60))
    assert torch.equal(_logits(loaded, ids), _logits(final.eval(), ids))
    capsys.readouterr()
    assert cli.main(["eval", "ifollow-heldout", "--model", str(record), "--limit", "2", "--max-new-tokens", "4",
                     "--out", str(tmp_path / "eval")]) == 0
    assert "ifollow-heldout" in capsys.readouterr().out

    hflm = pytest.importorskip("lm_eval.models.huggingface")
    from lm_eval.api.instance import Instance

    lm = hflm.HFLM(pretrained=str(record / "model"), device="cpu", dtype="float32", batch_size=1)
    (ll, _), = lm.loglikelihood([Instance(request_type="loglikelihood", doc={}, arguments=("hello", " world"),
                                          idx=0)])
    tok = lm.tokenizer
    ctx, cont = tok.encode("hello"), tok.encode(" world")
    logp = torch.log_softmax(_logits(final, ctx + cont), -1)
    expected = sum(float(logp[len(ctx) - 1 + i, t]) for i, t in enumerate(cont))
    assert ll == pytest.approx(expected, abs=1e-4)
    assert "<|im_start|>assistant" in lm.apply_chat_template([{"role": "user", "content": "hi"}])


def test_copy_model_takes_another_trainers_directory(tmp_path):
    """The openrlhf backend's ``checkpoint/openrlhf/final_hf`` becomes ``<record>/model/`` the same way."""
    from transformers import AutoModelForCausalLM

    from harness.backends.export import copy_model

    loaded = load_model("tiny-random-3", dtype="float32")
    final = tmp_path / "checkpoint" / "openrlhf" / "final_hf"
    loaded.model.save_pretrained(final)
    loaded.tokenizer.save_pretrained(final)
    (tmp_path / "provenance.json").write_text('{"status": "finished"}')
    saved = copy_model(final, tmp_path)
    assert saved["kind"] == "full" and saved["files"] == file_hashes(tmp_path / "model")
    ids = list(range(30, 45))
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.float32).eval()
    assert torch.equal(_logits(again, ids), _logits(loaded.model, ids))
    assert record_model_dir(tmp_path) == tmp_path / "model"
    with pytest.raises(FileNotFoundError, match="not a saved model"):
        copy_model(tmp_path / "nothing", tmp_path)
