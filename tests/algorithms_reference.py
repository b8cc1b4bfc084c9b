"""Plain-Python reference arithmetic for the algorithm tests (no torch, no project code).

The fixture batch: two groups (ids 7 and 3, interleaved), three rewards:
reward 0 is constant within group 3, reward 2 does not apply to group 7 (NaN-padded) and is
missing for one response of group 3; response lengths vary (T = 4).
"""

from __future__ import annotations

import math
import statistics

NAN = float("nan")
T = 4
ROWS = [  # (group id, rewards, number of valid tokens)
    (7, [1.0, 0.5, NAN], 4),
    (3, [1.0, 0.0, 1.0], 3),
    (7, [0.0, 0.0, NAN], 2),
    (3, [1.0, 1.0, NAN], 4),
    (7, [1.0, 1.0, NAN], 3),
    (3, [1.0, 0.0, 0.0], 1),
]
B, K = len(ROWS), 3
GROUPS = [g for g, _, _ in ROWS]
LENGTHS = [n for _, _, n in ROWS]


def isnan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)


def zscore(values: list[float], eps: float = 1e-6) -> list[float]:
    """Eq. 1 on one group's values (NaN -> 0; fewer than two or constant -> 0)."""
    present = [v for v in values if not isnan(v)]
    if len(present) < 2 or max(present) == min(present):
        return [0.0] * len(values)
    mu, sd = statistics.mean(present), statistics.stdev(present)
    return [0.0 if isnan(v) else (v - mu) / (sd + eps) for v in values]


def group_members(groups: list[int] = GROUPS) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        out.setdefault(g, []).append(i)
    return out


def group_z(column: list[float], eps: float = 1e-6, groups: list[int] = GROUPS) -> list[float]:
    out = [0.0] * len(column)
    for members in group_members(groups).values():
        for i, z in zip(members, zscore([column[i] for i in members], eps)):
            out[i] = z
    return out


def reward_column(k: int, rows=ROWS) -> list[float]:
    return [r[k] for _, r, _ in rows]


def per_reward_z(eps: float = 1e-6, rows=ROWS) -> list[list[float]]:
    """A[b][k]."""
    cols = [group_z(reward_column(k, rows), eps, [g for g, _, _ in rows]) for k in range(len(rows[0][1]))]
    return [[cols[k][b] for k in range(len(cols))] for b in range(len(rows))]


def tokens(per_response: list[float], lengths: list[int] = LENGTHS, T_: int = T) -> list[list[float]]:
    return [[v if t < n else 0.0 for t in range(T_)] for v, n in zip(per_response, lengths)]


def rescale(S: list[float], mode: str, lengths: list[int] = LENGTHS) -> tuple[float, float]:
    """(shift, scale) of the batch rescale, written out independently."""
    if mode == "none":
        return 0.0, 1.0
    if mode == "paper":
        return 0.0, statistics.stdev(S) + 1e-6
    if mode == "trl":
        return statistics.mean(S), statistics.stdev(S) + 1e-4
    if mode == "verl":
        values = [s for s, n in zip(S, lengths) for _ in range(n)]
        return statistics.mean(values), math.sqrt(statistics.variance(values) + 1e-8)
    raise ValueError(mode)


def mrtpo_tokens(C: list[list[float]], q: list[list[list[float]]], beta: float, bound: bool,
                 lengths: list[int] = LENGTHS, mode: str = "paper") -> tuple[list[list[float]], float]:
    """Eq. 6-8 by hand: returns (token advantages [B][T], bound scale s)."""
    nb, nk = len(C), len(C[0])
    S = [sum(C[b]) for b in range(nb)]
    R = []
    for b in range(nb):
        n = lengths[b]
        Rb = [0.0] * n
        for k in range(nk):
            vals = q[b][k][:n]
            mean = sum(vals) / n if not any(isnan(v) for v in vals) else NAN
            if isnan(mean) or mean == 0:
                continue
            for t in range(n):
                w = (1 - beta) + beta * vals[t] / mean
                Rb[t] += C[b][k] * (w - 1)
        R.append(Rb)
    den = sum(r * r for Rb in R for r in Rb)
    num = sum(n * s * s for n, s in zip(lengths, S))
    s = min(1.0, math.sqrt(num / den)) if (bound and den > 0) else 1.0
    shift, scale = rescale(S, mode, lengths)
    out = [[((S[b] + s * R[b][t]) - shift) / scale if t < lengths[b] else 0.0 for t in range(T)]
           for b in range(nb)]
    return out, s


def smoothstep(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return u * u * (3 - 2 * u)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def softmax(logits: list[float]) -> list[float]:
    m = max(logits)
    e = [math.exp(x - m) for x in logits]
    z = sum(e)
    return [x / z for x in e]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q) if a > 0)
