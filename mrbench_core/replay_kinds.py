"""The replay kinds: what the backend's replay engine computes for an algorithm before its token
advantages. Algorithms ask for one (``Algorithm.replay_request``), tasks say which they can build
contexts for (``Task.supported_replays``), backends which they run (``Backend.supported_replays``),
and the replay builders are keyed by it."""

from __future__ import annotations

import enum


class ReplayRequest(str, enum.Enum):
    """- ``none``: nothing (GRPO, GDPO, the reweighters).
    - ``leave_one_out``: ``relevance[B,K,T]`` = JS distance between replays after P_all and P_\\k
      (MRTPO, paper Eq. 4-5); only rewards that vary within their group need replaying.
    - ``joint``: ``joint_relevance[B,T]`` = JS distance between P_0 + all blocks and P_0 (mrtpo-joint).
    - ``rubric``: ``logprob_delta[B,T]`` = log pi(y_t|x+) - log pi(y_t|x-) (CoRT).
    - ``teacher``: teacher logits over the student's own tokens, for the algorithm's own loss (OPSD).
    - ``read_spans``: ``relevance[B,K,T]`` as 0/1 masks of the tokens each verifier reports it read
      (its verdict's character spans), no forward pass (mrtpo-oracle); NaN (uniform) where a
      verifier reports no span or reads the whole response.
    - ``entropy``: ``token_entropy[B,T]``, the old policy's entropy of the distribution that sampled
      each response token (the entropy-based credit methods: forking tokens, GTPO); taken from the
      sampling pass's logits where the engine has them, else one forward pass of the old policy.
    - ``token_ids``: ``token_ids[B,T]``, the sampled token ids, no forward pass (KTAE).
    - ``feedback``: ``logprob_delta[B,T]`` = log pi(y_t | P_all) - log pi(y_t | P_0) of the old policy,
      P_all the prompt with every verifier block of the response (Eq. 4), P_0 the sampling prompt:
      SDPO's self-teacher against the student.
    """

    NONE = "none"
    LEAVE_ONE_OUT = "leave_one_out"
    JOINT = "joint"
    RUBRIC = "rubric"
    TEACHER = "teacher"
    READ_SPANS = "read_spans"
    ENTROPY = "entropy"
    TOKEN_IDS = "token_ids"
    FEEDBACK = "feedback"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def _missing_(cls, value: object) -> ReplayRequest:
        raise ValueError(f"unknown replay kind {value!r}; known: {', '.join(k.value for k in cls)}")


#: replay kinds built without a forward pass (from the verdicts or the sampled ids): a backend may build them
#: where the batch is, and the model-parallel limits of a replay do not apply to them
WITHOUT_FORWARD = frozenset({ReplayRequest.READ_SPANS, ReplayRequest.TOKEN_IDS})
