"""Import OpenRLHF's real source on a CPU machine: the packages it needs that only run on GPU
clusters (Ray, vLLM, DeepSpeed, flash-attn) and a few small ones it imports at module level
(torchdata, aiohttp, pylatexenc) are replaced by stub modules, as OpenRLHF's own tests do.

``stubbed_openrlhf()`` installs the stubs, yields, and then puts ``sys.modules`` back as it
was, so no test sees an OpenRLHF module imported against the stubs once it has finished. The
stubs are ``types.ModuleType`` objects with a ``ModuleSpec`` (libraries probe optional
packages with ``importlib.util.find_spec``). The Ray stub runs everything in-process:
``ray.remote`` returns the class or function unchanged, ``ray.get`` and ``ray.put`` return their
argument, so an object built from a "remote" class is an ordinary object.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import sys
import types
import uuid
from collections.abc import Iterator
from typing import Any

import torch

#: top-level names whose modules are stubbed
STUBBED = ("ray", "vllm", "deepspeed", "flash_attn", "torchdata", "aiohttp", "pylatexenc")
#: modules that are imported for real against the stubs and must not outlive the test
IMPORTED_AGAINST_STUBS = ("openrlhf", "harness.backends.openrlhf.maker", "harness.backends.openrlhf.trainer",
                          "harness.backends.openrlhf.agent", "harness.backends.openrlhf.main",
                          "harness.backends.openrlhf.update")


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    module.__path__ = []  # a package: submodules resolve through sys.modules
    module.__dict__.update(attrs)
    return module


def _remote(obj: Any = None, **_: Any) -> Any:
    """``@ray.remote`` and ``@ray.remote(num_gpus=1)``: the object itself."""
    if obj is None:
        return lambda target: target
    return obj


def _ray() -> dict[str, types.ModuleType]:
    class PlacementGroup:
        def ready(self) -> None:
            return None

    class PlacementGroupSchedulingStrategy:
        def __init__(self, **kwargs: Any):
            self.kwargs = kwargs

    services = _module("ray._private.services", get_node_ip_address=lambda: "127.0.0.1")
    ray = _module("ray", remote=_remote, get=lambda refs, **_: refs, put=lambda value, **_: value,
                  wait=lambda refs, num_returns=1, **_: (refs[:num_returns], refs[num_returns:]),
                  is_initialized=lambda: True, init=lambda **_: None, get_gpu_ids=lambda: [0],
                  __version__="stub")
    ray._private = _module("ray._private", services=services)
    util = _module("ray.util")
    pg = _module("ray.util.placement_group", PlacementGroup=PlacementGroup,
                 placement_group=lambda bundles, strategy="PACK": PlacementGroup())
    strategies = _module("ray.util.scheduling_strategies",
                         PlacementGroupSchedulingStrategy=PlacementGroupSchedulingStrategy)
    util.placement_group, util.scheduling_strategies = pg, strategies
    ray.util = util
    return {"ray": ray, "ray._private": ray._private, "ray._private.services": services, "ray.util": util,
            "ray.util.placement_group": pg, "ray.util.scheduling_strategies": strategies}


class SamplingParams:
    """vLLM's sampling parameters, as a plain attribute bag."""

    def __init__(self, **kwargs: Any):
        self.n, self.max_tokens, self.stop_token_ids, self.logprobs = 1, None, None, None
        self.__dict__.update(kwargs)


def _vllm() -> dict[str, types.ModuleType]:
    vllm = _module("vllm", SamplingParams=SamplingParams, __version__="0.0.0-stub")
    inputs = _module("vllm.inputs", TokensPrompt=dict)
    utils = _module("vllm.utils", random_uuid=lambda: uuid.uuid4().hex)
    vllm.inputs, vllm.utils = inputs, utils
    return {"vllm": vllm, "vllm.inputs": inputs, "vllm.utils": utils}


def _deepspeed() -> dict[str, types.ModuleType]:
    class ZeroParamStatus:
        NOT_AVAILABLE = "not_available"

    names = ["deepspeed", "deepspeed.runtime", "deepspeed.runtime.zero", "deepspeed.runtime.zero.partition_parameters"]
    mods = {n: _module(n) for n in names}
    mods["deepspeed.runtime.zero.partition_parameters"].ZeroParamStatus = ZeroParamStatus
    mods["deepspeed"].__version__ = "0.0.0-stub"
    return mods


def _flash_attn() -> dict[str, types.ModuleType]:
    def unavailable(*_: Any, **__: Any) -> Any:
        raise RuntimeError("flash_attn is stubbed in tests")

    return {"flash_attn": _module("flash_attn"),
            "flash_attn.bert_padding": _module("flash_attn.bert_padding", index_first_axis=unavailable,
                                               pad_input=unavailable, rearrange=unavailable,
                                               unpad_input=unavailable),
            "flash_attn.utils": _module("flash_attn.utils"),
            "flash_attn.utils.distributed": _module("flash_attn.utils.distributed", all_gather=unavailable)}


class StatefulDataLoader(torch.utils.data.DataLoader):
    """torchdata's resumable loader, reduced to what a test needs: no state to save."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


def _small() -> dict[str, types.ModuleType]:
    class ClientError(Exception):
        pass

    return {"torchdata": _module("torchdata"),
            "torchdata.stateful_dataloader": _module("torchdata.stateful_dataloader",
                                                     StatefulDataLoader=StatefulDataLoader),
            "aiohttp": _module("aiohttp", ClientError=ClientError, ClientTimeout=lambda **_: None,
                               ClientSession=None),
            "pylatexenc": _module("pylatexenc"),
            "pylatexenc.latex2text": _module("pylatexenc.latex2text", LatexNodes2Text=object)}


def stub_modules() -> dict[str, types.ModuleType]:
    return {**_ray(), **_vllm(), **_deepspeed(), **_flash_attn(), **_small()}


def _owned(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in STUBBED + IMPORTED_AGAINST_STUBS)


@contextlib.contextmanager
def stubbed_openrlhf() -> Iterator[None]:
    """Stubs installed for the duration; ``sys.modules`` restored afterwards (see module docstring)."""
    saved = {name: mod for name, mod in sys.modules.items() if _owned(name)}
    for name in saved:
        _forget(name)
    sys.modules.update(stub_modules())
    try:
        yield
    finally:
        for name in [n for n in sys.modules if _owned(n)]:
            _forget(name)
        sys.modules.update(saved)
        for name, mod in saved.items():  # the packages' attributes back to the modules restored
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, mod)


def _forget(name: str) -> None:
    """Remove a module from ``sys.modules`` and from its package's attributes (``from package import
    child`` reads the attribute before ``sys.modules``)."""
    del sys.modules[name]
    parent, _, child = name.rpartition(".")
    if parent in sys.modules and not _owned(parent) and getattr(sys.modules[parent], child, None) is not None:
        delattr(sys.modules[parent], child)
