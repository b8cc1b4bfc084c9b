"""mrbench's rollout executor inside OpenRLHF's vLLM engines (``--train.agent_func_path`` names
this file; OpenRLHF loads it by path and instantiates ``AgentExecutor``).

For each of the G samples of a prompt it reads the prompt's label (:mod:`.labels`), builds the
token ids with the chat template exactly as the local backend does
(:func:`harness.models.chat_prompt_ids`; the prompt string OpenRLHF passes is ignored), samples
with OpenRLHF's sampling parameters (temperature, top-p, top-k) plus the end-of-turn stop ids and
``max_new_tokens``, keeps the ids up to and including the end-of-turn id
(:func:`harness.backends.vllm_rollout.completion_ids`), decodes them as the verifiers read them,
scores them with the task's verifiers under the run's time budget (``task.verifier_timeout_s``,
carried in the label; :func:`harness.training.step.score_response`: off the main thread the verifiers run
in a worker process that is killed past the budget), and returns the response with the label
carrying the verdicts. OpenRLHF's scalar reward is the mean of the applicable rewards (its logs only).
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy

from openrlhf.utils.agent import AgentExecutorBase

from harness.backends.openrlhf.labels import decode_label, encode_label, scalar_reward
from harness.backends.openrlhf.shards import cached_task
from harness.backends.vllm_rollout import completion_ids
from harness.models import chat_prompt_ids, prepare_tokenizer
from harness.training.batch import decode_response
from harness.training.step import score_response


class MRAgentExecutor(AgentExecutorBase):
    """Samples one response for a prompt row and scores it with mrbench's verifiers."""

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        payload = decode_label(label)
        ids = chat_prompt_ids(prepare_tokenizer(hf_tokenizer), payload.example.messages)
        params = deepcopy(sampling_params)
        params.max_tokens = payload.max_new_tokens
        params.stop_token_ids = list(payload.stop)
        output = await llm_engine.generate(ids, params)
        response, truncated = completion_ids(output.outputs[0], payload.stop)
        response = response[:payload.max_new_tokens]
        text = decode_response(hf_tokenizer, response)
        task = cached_task(payload.task, payload.task_options)
        t0 = time.perf_counter()
        # a worker thread: the budget holds through a worker process (tasks.base.Task.score_within)
        verdicts = await asyncio.to_thread(score_response, task, payload.example, text, payload.verifier_timeout_s)
        scored = payload.with_verdicts(verdicts, text, truncated, time.perf_counter() - t0)
        reward = scalar_reward(scored.rewards())
        return {"prompt": prompt, "label": encode_label(scored), "images": None, "mm_train_inputs": None,
                "observation_tokens": ids + response, "action_ranges": [(len(ids), len(ids) + len(response))],
                "rollout_log_probs": None, "truncated": truncated, "reward": reward, "scores": reward,
                "extra_logs": {}}


AgentExecutor = MRAgentExecutor
