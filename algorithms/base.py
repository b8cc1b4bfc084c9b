"""Shared pieces of every algorithm: the rollout batch, the algorithm base class, group
standardisation, batch rescaling and masked statistics.

Conventions used throughout ``algorithms/``:

* ``rewards[B, K]`` holds one value per response and reward; **NaN means "this reward does not
  apply to this response"** (K varies across prompts, e.g. one reward per instruction constraint).
  A NaN reward gets advantage 0 and is left out of every sum.
* ``group_ids[B]`` says which prompt group a response belongs to (any integers).
* ``response_mask[B, T]`` marks the response tokens that enter the loss; every token advantage
  returned by an algorithm is 0 where the mask is False.
* Per-token statistics from the replay engine are indexed like the response tokens. A relevance
  row that is NaN on the response's valid tokens means "not replayed": that (response, reward)
  keeps the uniform weight 1.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from abc import ABC
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import torch
from torch import Tensor

from algorithms.results import Advantages, Contributions
from mrbench_core.fields import check_value
from mrbench_core.replay_kinds import ReplayRequest

__all__ = ["Advantages", "Algorithm", "ConfigError", "Contributions", "ReplayRequest", "RolloutBatch"]


class ConfigError(ValueError):
    """An algorithm was configured with an unknown key or an invalid value."""


@dataclass
class RolloutBatch:
    """Everything an algorithm reads for one training step (pure tensors, one device).

    Required: ``rewards[B,K]`` float (NaN = reward absent), ``group_ids[B]`` long,
    ``response_mask[B,T]`` bool, ``step`` (0-based training step, drives warm-ups).

    Optional per-token statistics, filled by the replay engine as the algorithm's
    ``replay_request`` asks:

    - ``relevance[B,K,T]``: MRTPO's q_{k,t} in [0,1]; a NaN row (on the valid tokens) = not
      replayed, uniform weight.
    - ``joint_relevance[B,T]``: one relevance profile for all blocks together (mrtpo-joint).
    - ``logprob_delta[B,T]``: CoRT's delta_t = log pi(y_t|x+) - log pi(y_t|x-); NaN = not replayed.
    - ``token_entropy[B,T]``: the old policy's entropy (nats) of the next-token distribution that
      sampled each response token, at the rollout temperature (``ReplayRequest.ENTROPY``: the
      entropy-based credit methods); a response NaN on a valid token was not supplied.
    - ``token_ids[B,T]``: the sampled token ids (``ReplayRequest.TOKEN_IDS``: KTAE); any value
      past a response's end.

    Optional per-reward information from the task:

    - ``reward_low[K]``: the declared lower bound of each reward column (NaN = undeclared); SAW
      shifts rewards that can be negative by it, as the public SAW code does.
    - ``reward_names[K]``: the name of each reward column when every response agrees on it (text2sql,
      toolcall; None where names vary per prompt, as in instruction following), for weights by name.
    - ``total_steps``: the run's planned number of steps (the horizon of a reward-weight schedule
      that gives none of its own, :mod:`algorithms.weights`).
    """

    rewards: Tensor
    group_ids: Tensor
    response_mask: Tensor
    relevance: Tensor | None = None
    step: int = 0
    joint_relevance: Tensor | None = None
    logprob_delta: Tensor | None = None
    reward_low: Tensor | None = None
    reward_names: tuple[str, ...] | None = None
    total_steps: int | None = None
    token_entropy: Tensor | None = None
    token_ids: Tensor | None = None

    def __post_init__(self) -> None:
        if self.rewards.dim() != 2:
            raise ValueError(f"rewards must be [B, K], got shape {tuple(self.rewards.shape)}")
        B, K = self.rewards.shape
        if self.group_ids.shape != (B,):
            raise ValueError(f"group_ids must be [B]={B}, got shape {tuple(self.group_ids.shape)}")
        if self.response_mask.dim() != 2 or self.response_mask.shape[0] != B:
            raise ValueError(f"response_mask must be [B={B}, T], got {tuple(self.response_mask.shape)}")
        if self.response_mask.dtype != torch.bool:
            self.response_mask = self.response_mask.bool()
        if not self.rewards.is_floating_point():
            self.rewards = self.rewards.float()
        T = self.response_mask.shape[1]
        checks = [("relevance", self.relevance, (B, K, T)), ("joint_relevance", self.joint_relevance, (B, T)),
                  ("logprob_delta", self.logprob_delta, (B, T)), ("reward_low", self.reward_low, (K,)),
                  ("token_entropy", self.token_entropy, (B, T)), ("token_ids", self.token_ids, (B, T))]
        for field_name, value, shape in checks:
            if value is not None and tuple(value.shape) != shape:
                raise ValueError(f"{field_name} must have shape {shape}, got {tuple(value.shape)}")
        if self.step < 0:
            raise ValueError(f"step must be >= 0, got {self.step}")
        if self.reward_names is not None and len(self.reward_names) != K:
            raise ValueError(f"reward_names must have K={K} entries, got {len(self.reward_names)}")

    @property
    def num_responses(self) -> int:
        return self.rewards.shape[0]

    @property
    def num_rewards(self) -> int:
        return self.rewards.shape[1]


# ----------------------------------------------------------------------------------------------
# configuration


def make_config(config_cls: type, algorithm: str, kwargs: Mapping[str, Any],
                renamed: Mapping[str, str] | None = None) -> Any:
    """Build the typed config dataclass, rejecting unknown keys with the list of accepted ones and
    a renamed key (``renamed``: old -> new) with its new place."""
    for old, new in (renamed or {}).items():
        if old in kwargs:
            raise ConfigError(f"algorithm {algorithm!r}: {old!r} is now {new!r} (--algo.{new}); "
                              f"--algo.{old} is another algorithm's parameter")
    accepted = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ConfigError(f"algorithm {algorithm!r}: unknown config key(s) {unknown}; "
                          f"accepted keys: {', '.join(accepted) or '(none)'}")
    return build_config(config_cls, algorithm, kwargs)


def build_config(config_cls: type, algorithm: str, kwargs: Mapping[str, Any]) -> Any:
    """``config_cls(**kwargs)`` with numbers parsed as :func:`_number` does and each given value
    checked against what its field declares (``setting(ge=..., lt=..., choices=...)``: the one
    place an algorithm parameter's range is written) before the config's own ``__post_init__``
    runs, which is left the constraints between fields. Every error is a :class:`ConfigError`
    naming the algorithm and, for one field, ``--algo.KEY``:
    ``algorithm 'mrtpo': --algo.beta: must be >= 0 and < 1, got 2.0``."""
    hints = typing.get_type_hints(config_cls)
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    values = {}
    for key, value in kwargs.items():
        where = f"algorithm {algorithm!r}: --algo.{key}"
        values[key] = _number(value, hints.get(key), where)
        if key in fields:
            check_value(fields[key], values[key], where, ConfigError)
    try:
        return config_cls(**values)
    except TypeError as exc:  # a check comparing a value of the wrong type
        raise ConfigError(f"algorithm {algorithm!r}: {exc}") from None
    except ConfigError as exc:  # a constraint between fields, checked by the config's __post_init__
        message = str(exc)
        raise ConfigError(message if message.startswith("algorithm ") else f"algorithm {algorithm!r}: {message}") \
            from None


def config_with_aggregator(algorithm: str, config_cls: type, aggregator_cls: type,
                           config: Mapping[str, Any]) -> tuple[Any, Any]:
    """(own config, aggregator instance) of an algorithm built on another one's advantages (MRTPO on
    GDPO, the token-credit methods on GDPO or GRPO): each key goes to the config that declares it;
    an unknown key is refused listing both sets, and the aggregator's errors are reported as this
    algorithm's."""
    own = {f.name for f in dataclasses.fields(config_cls)}
    theirs = {f.name for f in dataclasses.fields(aggregator_cls.config_class)}
    unknown = sorted(set(config) - own - theirs)
    if unknown:
        raise ConfigError(f"algorithm {algorithm!r}: unknown config key(s) {unknown}; accepted keys: "
                          f"{', '.join(sorted(own))} (token weighting), "
                          f"{', '.join(sorted(theirs))} ({aggregator_cls.name} aggregation)")
    built = build_config(config_cls, algorithm, {k: v for k, v in config.items() if k in own})
    try:  # the aggregator's parameters are checked as its own, and reported as this algorithm's
        aggregator = aggregator_cls(**{k: v for k, v in config.items() if k in theirs})
    except ConfigError as exc:
        message = str(exc).removeprefix(f"algorithm {aggregator_cls.name!r}: ")
        raise ConfigError(f"algorithm {algorithm!r}: {message}") from None
    return built, aggregator


def _number(value: Any, tp: Any, where: str) -> Any:
    """``value`` as the number a ``float`` / ``int`` field (or one that may be None) takes: exponent
    forms as ``--help`` prints them (``1e-06``, which YAML 1.1 reads as a string) parse; text that is
    no number, and inf or NaN, are refused naming the field. Other fields pass unchanged."""
    args = set(typing.get_args(tp)) if typing.get_origin(tp) in (typing.Union, types.UnionType) else {tp}
    if value is None or not args & {float, int} or not args <= {float, int, type(None)}:
        return value
    if isinstance(value, str):
        try:
            value = float(value) if float in args else int(value)
        except ValueError:
            raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number, got {value!r}")
    if float in args:
        return float(value)
    if not float(value).is_integer():
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    return int(value)


def check(condition: bool, message: str) -> None:
    """Raise :class:`ConfigError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(message)


# ----------------------------------------------------------------------------------------------
# group statistics


def dense_groups(group_ids: Tensor) -> tuple[Tensor, int]:
    """Map arbitrary group ids to 0..G-1; returns (index[B], G)."""
    uniq, inverse = torch.unique(group_ids, return_inverse=True)
    return inverse, int(uniq.numel())


@dataclass
class GroupStats:
    """Per-group statistics of values[B,K] over each group's non-NaN entries (one helper for every
    algorithm that needs them). ``index[B]`` maps responses to groups 0..G-1; every other field
    is [G,K]: ``count``, ``total``, ``mean``, ``sq_dev`` (sum of squared deviations), ``low`` and
    ``high`` (min and max; +-inf-like sentinels where count is 0)."""

    index: Tensor
    count: Tensor
    total: Tensor
    mean: Tensor
    sq_dev: Tensor
    low: Tensor
    high: Tensor

    @property
    def sample_std(self) -> Tensor:
        """The (n-1) standard deviation (0 with fewer than two entries)."""
        return torch.sqrt(self.sq_dev / (self.count - 1).clamp_min(1))

    @property
    def population_std(self) -> Tensor:
        return torch.sqrt(self.sq_dev / self.count.clamp_min(1))

    @property
    def varying(self) -> Tensor:
        """bool[G,K]: at least two distinct values in the group."""
        return (self.count >= 2) & (self.high > self.low)


def group_stats(values: Tensor, group_ids: Tensor) -> GroupStats:
    """:class:`GroupStats` of values[B,K] (float) grouped by group_ids[B]."""
    idx, G = dense_groups(group_ids)
    r = values
    K = r.shape[1]
    valid = ~torch.isnan(r)
    r0 = torch.where(valid, r, torch.zeros_like(r))
    index = idx.unsqueeze(1).expand(-1, K)
    zeros = torch.zeros(G, K, dtype=r.dtype, device=r.device)
    count = zeros.clone().scatter_add_(0, index, valid.to(r.dtype))
    total = zeros.clone().scatter_add_(0, index, r0)
    mean = total / count.clamp_min(1)
    dev = torch.where(valid, r0 - mean[idx], torch.zeros_like(r))
    sq_dev = zeros.clone().scatter_add_(0, index, dev * dev)
    big = torch.finfo(r.dtype).max
    high = torch.full((G, K), -big, dtype=r.dtype, device=r.device).scatter_reduce(
        0, index, torch.where(valid, r, torch.full_like(r, -big)), reduce="amax")
    low = torch.full((G, K), big, dtype=r.dtype, device=r.device).scatter_reduce(
        0, index, torch.where(valid, r, torch.full_like(r, big)), reduce="amin")
    return GroupStats(idx, count, total, mean, sq_dev, low, high)


def group_standardise(rewards: Tensor, group_ids: Tensor, eps: float = 1e-6) -> Tensor:
    """Paper Eq. 1 per reward column: A = (r - mu_g) / (sigma_g + eps).

    mu_g and sigma_g are the mean and the SAMPLE (n-1) standard deviation of the reward over the
    responses of the group where it is not NaN. Decisions:
    - NaN reward -> advantage 0 (it is also excluded from mu and sigma);
    - fewer than two valid responses in the group -> advantage 0 (GDPO's public code would keep
      r itself with mean 0, std 1; a lone response carries no relative signal, so we give 0);
    - constant reward within the group (max == min) -> exactly 0.
    Works for rewards[B] too (treated as one column).
    """
    squeeze = rewards.dim() == 1
    r = rewards.unsqueeze(1) if squeeze else rewards
    r = r.float() if r.dtype in (torch.float16, torch.bfloat16) else r
    st = group_stats(r, group_ids)
    idx = st.index
    valid = ~torch.isnan(r)
    adv = (r - st.mean[idx]) / (st.sample_std[idx] + eps)
    adv = torch.where(valid & st.varying[idx], adv, torch.zeros_like(r))
    return adv.squeeze(1) if squeeze else adv


def rewards_varying_in_group(rewards: Tensor, group_ids: Tensor) -> Tensor:
    """bool[B,K]: the (response, reward) pairs whose reward is non-NaN and not constant within the
    group. Only these pairs carry a non-zero group advantage, so only they need a replay."""
    r = rewards.float()
    st = group_stats(r, group_ids)
    return ~torch.isnan(r) & (st.high > st.low)[st.index]


# ----------------------------------------------------------------------------------------------
# masked statistics and warm-up


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` over entries where ``mask`` is True (0 where nothing is valid)."""
    m = mask.to(values.dtype)
    if dim is None:
        return (values * m).sum() / m.sum().clamp_min(1)
    return (values * m).sum(dim) / m.sum(dim).clamp_min(1)


def masked_var(values: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance over masked entries; unbiased = divide by n-1 (0 when n < 2)."""
    m = mask.to(values.dtype)
    n = m.sum()
    mean = (values * m).sum() / n.clamp_min(1)
    ss = (((values - mean) * m) ** 2).sum()
    denom = (n - 1) if unbiased else n
    return torch.where(denom > 0, ss / denom.clamp_min(1), torch.zeros_like(ss))


def sample_std(values: Tensor) -> Tensor:
    """Sample (n-1) standard deviation of a 1-d tensor; 0 when it has fewer than two entries."""
    if values.numel() < 2:
        return torch.zeros((), dtype=values.dtype, device=values.device)
    return values.std(unbiased=True)


def smoothstep(u: float) -> float:
    """3u^2 - 2u^3 with u clipped to [0, 1] (zero slope at both ends)."""
    u = min(max(u, 0.0), 1.0)
    return 3.0 * u * u - 2.0 * u ** 3


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Paper App. D: lambda_n = smoothstep(min(n / N, 1)); N = 0 means no warm-up (lambda = 1)."""
    if warmup_steps <= 0:
        return 1.0
    return smoothstep(step / warmup_steps)


def broadcast_to_tokens(per_response: Tensor, mask: Tensor) -> Tensor:
    """[B] -> [B,T], zero where the mask is False."""
    return torch.where(mask, per_response.unsqueeze(1).to(torch.float32).expand_as(mask),
                       torch.zeros((), dtype=torch.float32, device=mask.device))


def finite_or_nan(x: Tensor | float) -> float:
    value = float(x)
    return value if math.isfinite(value) else float("nan")


# ----------------------------------------------------------------------------------------------
# the algorithm base class


class Algorithm(ABC):
    """An advantage estimator: rewards [B,K] (+ replayed statistics) -> token advantages [B,T].

    Subclasses set ``name``, ``config_class`` and what they need from the backend, and implement
    :meth:`advantages` (or only :meth:`token_advantages`, when they log nothing of their own).
    ``config`` is the typed config dataclass; unknown keys raise :class:`ConfigError` listing the
    accepted ones.

    What an algorithm declares, and a backend must provide before the step:

    - ``replay_request``: the replay kind whose statistics the batch must carry
      (:class:`ReplayRequest`; ``needs_replay(step)`` may skip it on some steps);
    - ``needs_reference``: a frozen copy of the initial policy (OPSD's teacher);
    - ``has_loss``: a loss term of its own, which the backend adds to the policy objective. It is
      derived, never written: True exactly when the class implements :meth:`own_loss` (OPSD's
      distillation on the teacher replay). The term's coefficient lives in the algorithm's own
      config, never in the backend's.

    What an algorithm contributes, beside its token advantages: :meth:`contributions`, the split of
    its advantage over the rewards (the ``adv/<r>/...`` and ``credit/<r>/...`` diagnostics), and
    :meth:`own_loss`. Both are optional; the defaults are "no split" and "no loss of its own".

    ``name`` is set by the registration (``@ALGORITHMS.register("name")``). Config fields are
    declared with ``setting(default, help=...)`` from :mod:`mrbench_core.fields`, so that
    ``mrbench run --algo NAME --help`` describes each one.
    """

    name: str = ""
    replay_request: ReplayRequest = ReplayRequest.NONE
    config_class: type = object
    needs_reference: bool = False
    #: whether the class implements :meth:`own_loss` (set for each subclass; see the class docstring)
    has_loss: ClassVar[bool] = False
    #: parameters that were renamed, old name -> new one: refused under the old name with the new place
    renamed: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        implements = cls.own_loss is not Algorithm.own_loss
        if "has_loss" in cls.__dict__ and bool(cls.__dict__["has_loss"]) != implements:
            raise TypeError(f"{cls.__qualname__} sets has_loss = {cls.__dict__['has_loss']!r} but "
                            f"{'implements' if implements else 'does not implement'} own_loss(): has_loss is "
                            f"derived from own_loss; implement own_loss(student_logits, teacher_logits, "
                            f"response_mask) for a loss term of its own and leave has_loss unset")
        cls.has_loss = implements

    def __init__(self, **config: Any):
        self.config = make_config(self.config_class, self.name, config, self.renamed)

    def advantages(self, batch: RolloutBatch) -> Advantages:
        """The token advantages [B,T] (float32, zero where ``batch.response_mask`` is False), the
        scalars to log for this batch and, where the algorithm has them, its per-reward token
        weights (:class:`Advantages`), from one computation. Default: :meth:`token_advantages`
        and mean |A| over valid tokens."""
        if type(self).token_advantages is Algorithm.token_advantages:
            raise NotImplementedError(f"{type(self).__name__} must implement advantages() or token_advantages()")
        adv = self.token_advantages(batch)
        return Advantages(adv, {"adv_abs_mean": finite_or_nan(masked_mean(adv.abs(), batch.response_mask))})

    def token_advantages(self, batch: RolloutBatch) -> Tensor:
        """Tensor[B,T] float32, zero where ``batch.response_mask`` is False."""
        return Advantages.of(self.advantages(batch)).tokens

    def contributions(self, batch: RolloutBatch, result: Advantages) -> Contributions | None:
        """How the token advantage of ``result`` (this algorithm's :meth:`advantages` on ``batch``)
        splits over the batch's rewards, as :class:`Contributions`; None where it does not (the
        default: one advantage for the summed reward, as CoRT and OPSD have). A family implements it
        once and gets the per-reward diagnostics (``adv/<r>/...``; ``credit/<r>/...`` with token
        weights); it reads what it needs from ``result`` rather than computing it again."""
        return None

    def own_loss(self, student_logits: Tensor, teacher_logits: Tensor, response_mask: Tensor) -> Tensor:
        """The algorithm's own loss term for one micro-batch, a scalar with gradient, which the
        backend adds to the policy objective (weighted by the micro-batch's share of the update's
        valid tokens): ``student_logits[b,T,V]`` the policy's logits at the response positions (with
        gradient, at the rollout temperature), ``teacher_logits[b,T,V]`` the teacher replay's
        (``ReplayRequest.TEACHER``: the reference policy under the privileged context, detached),
        ``response_mask[b,T]``. Implementing it sets :attr:`has_loss`; the base class has none."""
        raise NotImplementedError(f"{type(self).__name__} has no loss of its own (has_loss is False)")

    def needs_replay(self, step: int) -> bool:
        """Whether the backend must run the replay at this step (it may skip it when False)."""
        return self.replay_request is not ReplayRequest.NONE

    def config_dict(self) -> dict[str, Any]:
        """A flat JSON-friendly view of the configuration, for run records."""
        return dataclasses.asdict(self.config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"
