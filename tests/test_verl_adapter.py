"""verl's own code scores mrbench's tasks through :mod:`mrbench_integrations.verl` (issue 50).

verl 0.9.1 is installed without its dependency tree (scripts/setup.sh --dev: ``--no-deps`` with
tensordict, omegaconf and the few modules its reward managers import), so these run verl's real
classes: its parquet reader (``RLHFDataset``) on the files ``python -m
mrbench_integrations.verl_parquet`` writes; the reward-loop worker its trainer uses (custom
reward function loaded by path, the ``naive`` manager scoring in executor threads) and the legacy
``NaiveRewardManager`` on a batch of those rows; and its GDPO estimator on the reward keys. Each
value equals what ``mrbench score`` gives the same response.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

pytest.importorskip("verl", reason="verl is installed by scripts/setup.sh --dev (verl==0.9.1, --no-deps)")

from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo.core_algos import compute_gdpo_outcome_advantage
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.reward_manager import NaiveRewardManager

import mrbench_integrations.verl as adapter
from algorithms import RolloutBatch, get_algorithm
from harness import cli
from harness.models import byte_tokenizer
from mrbench_integrations import verl_parquet
from mrbench_integrations.task_rewards import reward_keys
from tasks.base import Example
from tasks.registry import make_task

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPTS = 4
#: responses given to every prompt (G = 3): a pass or a fail for the generated constraints
RESPONSES = [
    "<<A Title>>\n\nhello world. this is all lowercase and has no comma.\n\nP.S. candle candle candle",
    "Hello, World! A comma, and Capitals.",
    '"*highlighted* one. two [placeholder]."',
]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl-data")
    assert verl_parquet.main(["ifollow", "--out", str(out), "--limit", str(PROMPTS), "--val-limit", "2"]) == 0
    return out


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    byte_tokenizer().save_pretrained(str(path))
    return path


def verl_rows(written: Path, tokenizer: Any, tmp: Path) -> dict[str, np.ndarray]:
    """The train file as verl's own dataset class reads and collates it (non-tensor fields)."""
    config = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False,
                               "cache_dir": str(tmp / "cache")})
    dataset = RLHFDataset(data_files=[str(written / "train.parquet")], tokenizer=tokenizer, config=config)
    assert len(dataset) == PROMPTS
    return collate_fn([dataset[i] for i in range(PROMPTS)])


def batch_of(rows: dict[str, np.ndarray], tokenizer: Any) -> DataProto:
    """Every prompt with each of :data:`RESPONSES`, as a rollout leaves it (left-padded prompt
    ids, right-padded response ids, one attention mask over both)."""
    prompts = [tokenizer.apply_chat_template(list(m), add_generation_prompt=True, tokenize=True)
               for m in rows["raw_prompt"]]
    prompts = [p["input_ids"] if hasattr(p, "keys") else p for p in prompts]
    responses = [tokenizer.encode(r, add_special_tokens=False) + [tokenizer.eos_token_id] for r in RESPONSES]
    P, R = max(map(len, prompts)), max(map(len, responses))
    pad = tokenizer.pad_token_id
    ids, resp, mask, order = [], [], [], []
    for i, p in enumerate(prompts):
        for r in responses:
            ids.append([pad] * (P - len(p)) + p)
            resp.append(r + [pad] * (R - len(r)))
            mask.append([0] * (P - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (R - len(r)))
            order.append(i)
    non_tensors = {k: rows[k][order] for k in ("data_source", "reward_model", "extra_info")}
    non_tensors["uid"] = np.array([f"p{i}" for i in order], dtype=object)
    return DataProto.from_dict(tensors={"prompts": torch.tensor(ids), "responses": torch.tensor(resp),
                                        "attention_mask": torch.tensor(mask)}, non_tensors=non_tensors)


def mrbench_score(data: DataProto, tmp: Path) -> list[dict[str, Any]]:
    """``mrbench score ifollow`` on the batch's (example, response) pairs."""
    rows = []
    for i in range(len(data)):
        truth = json.loads(data.non_tensor_batch["reward_model"][i]["ground_truth"])
        example = json.loads(truth["example"])
        rows.append({"key": example["id"], "prompt": example["meta"]["prompt"],
                     "instruction_id_list": [c for c, _ in example["meta"]["constraints"]],
                     "kwargs": [kw for _, kw in example["meta"]["constraints"]], "response": RESPONSES[i % 3]})
    (tmp / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli.main(["score", "ifollow", "--data", str(tmp / "rows.jsonl"), "--out", str(tmp / "scored.jsonl")]) == 0
    return [json.loads(line) for line in (tmp / "scored.jsonl").read_text().splitlines()]


def expected_row(row: dict[str, Any], keys: list[str]) -> list[float | None]:
    """One ``mrbench score`` row's rewards by the dataset's keys (None: absent or null)."""
    row_keys = reward_keys(make_task("ifollow"), Example(id="", messages=[], reward_names=row["reward_names"]))
    values = dict(zip(row_keys, (row["rewards"][n] for n in row["reward_names"])))
    return [values.get(k) for k in keys]


def expected_extra_info(scored: list[dict[str, Any]], keys: list[str]) -> dict[str, list[float]]:
    """mrbench score's rows as the adapter's extra info: the sum, and every key (absent: 0.0)."""
    rows = [expected_row(row, keys) for row in scored]
    out = {"score": [float(sum(v for v in r if v is not None)) for r in rows]}
    out.update({k: [0.0 if r[j] is None else float(r[j]) for r in rows] for j, k in enumerate(keys)})
    return out


def dataset_keys(data: DataProto) -> list[str]:
    return json.loads(data.non_tensor_batch["reward_model"][0]["ground_truth"])["keys"]


def test_the_parquet_files_are_what_verls_reader_reads(written, tmp_path):
    import pandas as pd

    train, val = pd.read_parquet(written / "train.parquet"), pd.read_parquet(written / "val.parquet")
    assert len(train) == PROMPTS and len(val) == 2
    assert set(train.columns) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    rows = verl_rows(written, byte_tokenizer(), tmp_path)
    assert list(rows["data_source"]) == ["mrbench/ifollow"] * PROMPTS
    truths = [json.loads(r["ground_truth"]) for r in rows["reward_model"]]
    val_truths = [json.loads(r["ground_truth"]) for r in val["reward_model"]]
    assert all(t["keys"] == truths[0]["keys"] for t in truths + val_truths)  # one key set for both files
    assert [m[-1]["content"] for m in rows["raw_prompt"]] == [json.loads(t["example"])["meta"]["prompt"]
                                                             for t in truths]


def test_verls_reward_loop_worker_scores_as_mrbench_score(written, tokenizer_dir, tmp_path):
    """verl's trainer path: the custom reward function loaded from its file path, the registered
    ``naive`` manager calling it in executor threads (mrbench's verifier budget then runs in a
    worker process), the manager class assembling the token-level reward."""
    tokenizer = byte_tokenizer()
    data = batch_of(verl_rows(written, tokenizer, tmp_path), tokenizer)
    config = OmegaConf.create({
        "actor_rollout_ref": {"model": {"path": str(tokenizer_dir), "tokenizer_path": None}},
        "reward": {"custom_reward_function": {"path": adapter.__file__, "name": "compute_score"},
                   "reward_manager": {"source": "register", "name": "naive"},
                   "reward_model": {"enable": False}},
        "trainer": {"experiment_name": "mrbench"}})
    worker = RewardLoopWorker(config)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    keys = dataset_keys(data)
    expected = expected_extra_info(mrbench_score(data, tmp_path), keys)
    got = {k: [o["reward_extra_info"][k] for o in outputs] for k in expected}
    assert got == expected
    assert [o["reward_score"] for o in outputs] == expected["score"]
    assert any(0 < s for s in expected["score"]) and len(set(expected["score"])) > 1  # not vacuous
    rm_scores = type(worker.reward_manager).assemble_rm_scores(data, [o["reward_score"] for o in outputs])
    assert rm_scores.sum(dim=1).tolist() == expected["score"]


def test_verls_legacy_naive_reward_manager_scores_as_mrbench_score(written, tmp_path):
    tokenizer = byte_tokenizer()
    data = batch_of(verl_rows(written, tokenizer, tmp_path), tokenizer)
    manager = NaiveRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=adapter.compute_score)
    result = manager(data, return_dict=True)
    expected = expected_extra_info(mrbench_score(data, tmp_path), dataset_keys(data))
    assert {k: list(v) for k, v in result["reward_extra_info"].items()} == expected
    assert result["reward_tensor"].sum(dim=1).tolist() == expected["score"]


def test_verls_gdpo_on_the_keys_is_mrbench_gdpo_where_absent_rewards_are_nan(written, tmp_path):
    """A key a prompt lacks is 0.0 for its whole group, so verl's per-key group z-score of it is 0,
    as mrbench's is for a NaN reward: verl's GDPO estimator on the adapter's keys equals mrbench's
    ``gdpo`` with ``rescale: verl`` on the NaN-padded rewards."""
    tokenizer = byte_tokenizer()
    data = batch_of(verl_rows(written, tokenizer, tmp_path), tokenizer)
    result = NaiveRewardManager(tokenizer=tokenizer, num_examine=0, compute_score=adapter.compute_score)(
        data, return_dict=True)
    keys = dataset_keys(data)
    non_tensors = {k: np.array(v) for k, v in result["reward_extra_info"].items()}
    prompt_length = data.batch["prompts"].shape[1]
    response_mask = data.batch["attention_mask"][:, prompt_length:]
    theirs, _ = compute_gdpo_outcome_advantage(
        token_level_rewards=result["reward_tensor"], response_mask=response_mask,
        index=data.non_tensor_batch["uid"], config={"gdpo_reward_keys": keys}, non_tensor_batch=non_tensors,
        batch={"prompts": data.batch["prompts"], "attention_mask": data.batch["attention_mask"]})
    scored = mrbench_score(data, tmp_path)
    nan_padded = torch.tensor([[v if v is not None else float("nan") for v in
                                expected_row(row, keys)] for row in scored])
    ours = get_algorithm("gdpo", rescale="verl").token_advantages(RolloutBatch(
        rewards=nan_padded, group_ids=torch.arange(len(scored)) // 3, response_mask=response_mask.bool()))
    assert theirs.abs().max().item() > 0.1
    assert (theirs - ours).abs().max().item() <= 1e-5



def test_other_data_sources_go_to_verls_own_scorers():
    assert adapter.compute_score("openai/gsm8k", "so the answer is #### 42", "42") == 1.0
    assert adapter.compute_score("openai/gsm8k", "#### 41", "42") == 0.0


def test_a_ground_truth_that_is_not_mrbench_s_is_one_clear_error():
    with pytest.raises(ValueError, match="ground_truth is not what mrbench_integrations.verl_parquet writes"):
        adapter.compute_score("mrbench/ifollow", "text", "42")
