"""``mrbench eval BENCH --model RECORD`` reproduces the record's ``eval.json``: it takes the record's
end-of-run settings (cases, longest response, precision, attention) unless told otherwise, and
the exported model, loaded in the precision the run decoded with, decodes exactly as the run's
rollout copy did (:func:`harness.models.cast_weights`). Every ``eval.json`` and ``summary.json``
says how it decoded."""

from __future__ import annotations

import json

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from evals import runner as eval_runner
from harness import cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RUN = ["run", "--model", "tiny-random", "--model.dtype", "bfloat16", "--schedule.steps", "1",
       "--sampling.prompts_per_step", "1", "--sampling.group_size", "2", "--sampling.max_new_tokens", "8",
       "--schedule.eval_limit", "3", "--schedule.eval_max_new_tokens", "24", "--optim.mini_batches", "1"]


def _capture(monkeypatch) -> list[dict[str, str]]:
    """The responses of every benchmark generation (not the estimate's probes), in order."""
    seen: list[dict[str, str]] = []
    original = eval_runner.generate_for_cases

    def recording(generate, cases, max_new_tokens, **kwargs):
        out = original(generate, cases, max_new_tokens, **kwargs)
        if kwargs.get("progress", True):
            seen.append(dict(out))
        return out

    monkeypatch.setattr(eval_runner, "generate_for_cases", recording)
    return seen


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """A finished tiny-random run, decoded in bf16, with the responses of its end-of-run evaluation."""
    mp = pytest.MonkeyPatch()
    try:
        seen = _capture(mp)
        rec = tmp_path_factory.mktemp("rec") / "run"
        assert cli.main(RUN + ["--output.dir", str(rec)]) == 0
    finally:
        mp.undo()
    assert len(seen) == 1
    return rec, seen[0]


def test_eval_json_says_how_it_decoded(record):
    rec, _ = record
    evaluation = json.loads((rec / "eval.json").read_text())
    assert evaluation["decoding"]["dtype"] == "bfloat16"
    assert evaluation["decoding"]["attention"]  # the implementation in use, e.g. mrbench_grouped_matmul
    assert evaluation["eval_limit"] == 3 and evaluation["eval_max_new_tokens"] == 24


@pytest.mark.parametrize("flags", [[], ["--limit", "3", "--max-new-tokens", "24"]])
def test_eval_of_the_record_reproduces_its_eval_json(record, tmp_path, monkeypatch, capsys, flags):
    rec, run_texts = record
    seen = _capture(monkeypatch)
    out = tmp_path / "ev"
    assert cli.main(["eval", "ifollow-heldout", "--model", str(rec), "--out", str(out), *flags]) == 0
    assert "the record's evaluation settings: 3 cases, at most 24 new tokens, bfloat16" in capsys.readouterr().out
    assert seen == [run_texts]  # the same responses, token for token
    summary = json.loads((out / "summary.json").read_text())
    recorded = json.loads((rec / "eval.json").read_text())["benchmarks"]["ifollow-heldout"]["summary"]
    assert {k: summary[k] for k in recorded} == recorded
    assert summary["decoding"]["dtype"] == "bfloat16" and summary["max_new_tokens"] == 24


def test_flags_override_the_record_settings(record, tmp_path, monkeypatch):
    rec, _ = record
    seen = _capture(monkeypatch)
    out = tmp_path / "ev"
    assert cli.main(["eval", "ifollow-heldout", "--model", str(rec), "--out", str(out), "--limit", "1",
                     "--max-new-tokens", "4", "--dtype", "float32", "--max-minutes", "0"]) == 0
    assert len(seen[0]) == 1
    assert json.loads((out / "summary.json").read_text())["decoding"]["dtype"] == "float32"


def test_a_bf16_copy_decodes_as_the_saved_weights_loaded_in_bf16(tmp_path):
    """The rollout copy is cast as from_pretrained casts: weights rounded, rotary frequencies kept in
    float32 (``model.to(bf16)`` would round those too and change every position's rotation)."""
    import copy

    from transformers import AutoModelForCausalLM

    from harness.models import cast_weights, tiny_model

    policy = tiny_model(0).model.float()
    policy.save_pretrained(str(tmp_path / "m"))
    copied = cast_weights(copy.deepcopy(policy), torch.bfloat16).eval()
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "m"), dtype=torch.bfloat16).eval()
    assert {n: b.dtype for n, b in copied.named_buffers()} == {n: b.dtype for n, b in loaded.named_buffers()}
    assert all(p.dtype == torch.bfloat16 for p in copied.parameters())
    ids = torch.randint(0, 250, (2, 300))
    with torch.no_grad():
        assert torch.equal(copied(ids).logits, loaded(ids).logits)
        rounded = copy.deepcopy(policy).to(torch.bfloat16).eval()
        assert not torch.equal(rounded(ids).logits, loaded(ids).logits)  # what the rollout copy was before
