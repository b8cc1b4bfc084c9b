"""The built-in multi-constraint prompts: ``ifollow`` trains on these when no HIR-16K data is given.

A prompt is a base request (written for this project, :data:`BASE_REQUESTS`) plus K mutually
compatible IFEval-type constraints with sampled parameters, rendered by
:mod:`tasks.ifollow.template`. Everything is deterministic in (purpose, seed): prompt i is drawn
from ``random.Random`` seeded by the stream key ``f"{purpose}:{seed}:{i}"`` (:mod:`mrbench_core.seeds`),
so prompts do not depend on how many are asked for, and different purposes (training, held-out)
never share a stream.

Choice of constraint types (decision): types whose verdicts vary for a small model, so that
rewards vary within a sampling group. Measured with SmolLM2-135M (8 samples on each of two
prompts): keyword inclusion 7/8, a <<title>> 5/8, at least 40 words 7/8, fewer than 60 words
2/8, no commas 1/8 and 2/8, all-lowercase 0/8, exact end phrase 0/8. Middling types get the
largest weights; the rarely satisfied ones (lowercase, end phrase) the smallest. Types a small
model essentially never satisfies or that fight the rest (JSON, two responses, repeat the
request, another language, all capitals, a fixed answer) are left out.

Compatibility is by rule (:func:`_compatible`): at most one constraint per type, except one
lower and one upper bound on words or sentences (lower < upper with room between); no
lowercase with capital-word minimums or with section headers; no capital-word maximum with
upper-case section headers; forbidden words disjoint from keywords and end phrases; a
"less than" letter bound only for a letter absent from every keyword, end phrase and section
word. :mod:`tasks.ifollow.witness` builds a response satisfying all of a prompt's constraints
(the tests run it on the generated prompts).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from mrbench_core.seeds import TRAIN_PROMPTS, stream_key
from tasks.ifollow.constraints import get_constraint
from tasks.ifollow.template import ConstrainedPrompt, render_prompt

BASE_REQUESTS: tuple[str, ...] = (
    "Write a short note to a neighbour about a lost cat.",
    "Describe your ideal weekend morning.",
    "Explain why people enjoy walking in the rain.",
    "Give advice to someone starting to learn the guitar.",
    "Write a short story about a robot that plants trees.",
    "Describe a busy market on a summer day.",
    "Explain how to make a simple cup of tea.",
    "Write a review of an imaginary seaside restaurant.",
    "Tell a friend about a book you enjoyed.",
    "Describe the view from a mountain top at sunrise.",
    "Write a product description for a reusable water bottle.",
    "Explain to a child why the sky looks blue.",
    "Write a welcome message for new members of a chess club.",
    "Describe a day in the life of a lighthouse keeper.",
    "Give tips for keeping a small garden healthy.",
    "Write a letter inviting a friend to a picnic.",
    "Explain the benefits of reading before bed.",
    "Describe an old library that you like to visit.",
    "Write a short speech for a school sports day.",
    "Explain how a bicycle helps people stay healthy.",
    "Describe a rainy afternoon in a small town.",
    "Write an announcement for a community bake sale.",
    "Give advice for a first day at a new job.",
    "Describe the sounds of a forest at night.",
    "Write a thank you note to a helpful teacher.",
    "Explain why recycling matters for a city.",
    "Describe a train journey through the countryside.",
    "Write a short poem about the ocean.",
    "Give a plan for a relaxing evening at home.",
    "Describe a festival that celebrates music.",
    "Explain how to care for a house plant.",
    "Write a travel tip for visitors to a quiet island.",
    "Describe the smell of fresh bread in a bakery.",
    "Write a message asking a colleague for help with a report.",
    "Explain what makes a good team meeting.",
    "Describe a winter walk along a frozen lake.",
    "Write a short story about a lost umbrella.",
    "Give advice on saving money for a holiday.",
    "Describe a favourite childhood game.",
    "Write a short blog post about learning to cook.",
)

KEYWORDS: tuple[str, ...] = (
    "garden", "river", "lantern", "bicycle", "coffee", "window", "music", "ocean", "mountain",
    "library", "sunlight", "bridge", "candle", "harbor", "meadow", "notebook", "orchard",
    "pebble", "season", "thunder", "village", "whistle", "blanket", "compass", "feather",
)
FORBIDDEN: tuple[str, ...] = ("very", "really", "just", "basically", "actually", "stuff", "thing", "nice")
END_PHRASES: tuple[str, ...] = (
    "Is there anything else I can help with?", "Let me know if you have additional questions.",
    "That is all for today.", "Thank you for reading.", "See you soon.",
)
SECTION_WORDS: tuple[str, ...] = ("Section", "Part", "Step")
COMMON_LETTERS: tuple[str, ...] = ("e", "a", "t", "o", "n")
RARE_LETTERS: tuple[str, ...] = ("q", "z", "x", "j")


# -- parameter samplers (in this order: later ones see earlier ones' choices) ------------------
Sampler = Callable[[random.Random, dict[str, Any]], dict[str, Any]]


def _keywords(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    words = rng.sample([w for w in KEYWORDS if w not in ctx["used_words"]], rng.choice((1, 2)))
    ctx["used_words"].update(words)
    return {"keywords": words}


def _frequency(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    word = rng.choice([w for w in KEYWORDS if w not in ctx["used_words"]])
    ctx["used_words"].add(word)
    return {"keyword": word, "frequency": rng.choice((2, 3)), "relation": "at least"}


def _forbidden(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    return {"forbidden_words": rng.sample(FORBIDDEN, rng.choice((2, 3)))}


def _end(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    phrase = rng.choice(END_PHRASES)
    ctx["used_words"].update(phrase.lower().split())
    return {"end_phrase": phrase}


def _sections(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    word = rng.choice(SECTION_WORDS)
    ctx["used_words"].add(word.lower())
    return {"section_spliter": word, "num_sections": rng.choice((2, 3))}


def _letter(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    text = " ".join(ctx["used_words"])
    rare = [c for c in RARE_LETTERS if c not in text]
    if rare and rng.random() < 0.5:
        return {"letter": rng.choice(rare), "let_frequency": rng.choice((2, 3)), "let_relation": "less than"}
    return {"letter": rng.choice(COMMON_LETTERS), "let_frequency": rng.choice((5, 8, 10)), "let_relation": "at least"}


def _words(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    if ctx.get("words_at_least") is None and (ctx.get("words_less_than") is not None or rng.random() < 0.5):
        n = rng.choice((20, 30, 40, 50))
        ctx["words_at_least"] = n
        return {"num_words": n, "relation": "at least"}
    n = rng.choice((80, 100, 120, 150))
    ctx["words_less_than"] = n
    return {"num_words": n, "relation": "less than"}


def _sentences(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    if ctx.get("sent_at_least") is None and (ctx.get("sent_less_than") is not None or rng.random() < 0.5):
        n = rng.choice((2, 3, 4))
        ctx["sent_at_least"] = n
        return {"num_sentences": n, "relation": "at least"}
    n = rng.choice((8, 10, 12))
    ctx["sent_less_than"] = n
    return {"num_sentences": n, "relation": "less than"}


def _capital(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    if ctx.get("capital_at_least_ok", True) and rng.random() < 0.5:
        return {"capital_frequency": rng.choice((1, 2, 3)), "capital_relation": "at least"}
    return {"capital_frequency": rng.choice((4, 5, 6)), "capital_relation": "less than"}


def _const(**kw: Any) -> Sampler:
    return lambda rng, ctx: {k: (rng.choice(v) if isinstance(v, tuple) else v) for k, v in kw.items()}


#: id -> (weight, sampler); sampled parameters use IFEval's kwargs names
POOL: dict[str, tuple[float, Sampler]] = {
    "detectable_format:title": (2.0, _const()),
    "length_constraints:number_words": (2.0, _words),
    "punctuation:no_comma": (1.5, _const()),
    "keywords:frequency": (1.5, _frequency),
    "detectable_format:number_highlighted_sections": (1.5, _const(num_highlights=(1, 2, 3))),
    "detectable_content:postscript": (1.5, _const(postscript_marker=("P.S.", "P.P.S"))),
    "length_constraints:number_sentences": (1.2, _sentences),
    "keywords:forbidden_words": (1.2, _forbidden),
    "detectable_content:number_placeholders": (1.2, _const(num_placeholders=(1, 2))),
    "keywords:existence": (1.0, _keywords),
    "keywords:letter_frequency": (1.0, _letter),
    "detectable_format:number_bullet_lists": (1.0, _const(num_bullets=(2, 3, 4))),
    "change_case:capital_word_frequency": (1.0, _capital),
    "startend:quotation": (0.8, _const()),
    "length_constraints:number_paragraphs": (0.8, _const(num_paragraphs=(2, 3))),
    "detectable_format:multiple_sections": (0.6, _sections),
    "startend:end_checker": (0.6, _end),
    "change_case:english_lowercase": (0.5, _const()),
}
#: types that may appear twice in one prompt (once per relation)
TWICE = ("length_constraints:number_words", "length_constraints:number_sentences")
#: ids whose parameters other samplers depend on are sampled first, letter bounds last
SAMPLE_ORDER = ("keywords:existence", "keywords:frequency", "startend:end_checker", "detectable_format:multiple_sections")

_EXCLUDED_PAIRS = {
    frozenset({"change_case:english_lowercase", "detectable_format:multiple_sections"}),
    frozenset({"length_constraints:number_paragraphs", "detectable_format:multiple_sections"}),
}


def _compatible(chosen: list[str], cid: str) -> bool:
    """May ``cid`` join the types already ``chosen``? (rules in the module docstring)."""
    if cid in chosen and (cid not in TWICE or chosen.count(cid) >= 2):
        return False
    return all(frozenset({cid, other}) not in _EXCLUDED_PAIRS for other in chosen)


def sample_types(rng: random.Random, k: int) -> list[str]:
    """K compatible constraint types, weighted by :data:`POOL`, in sampled order."""
    chosen: list[str] = []
    while len(chosen) < k:
        candidates = [c for c in POOL if _compatible(chosen, c)]
        if not candidates:
            break
        weights = [POOL[c][0] for c in candidates]
        chosen.append(rng.choices(candidates, weights=weights)[0])
    return chosen


def generate_prompt(index: int, seed: int = 0, min_constraints: int = 5, max_constraints: int = 7,
                    purpose: str = TRAIN_PROMPTS) -> ConstrainedPrompt:
    """Prompt ``index`` of the generated set for (``purpose``, ``seed``) (K uniform in [min, max]).

    ``purpose`` names the stream (:mod:`mrbench_core.seeds`): the held-out set
    (``heldout-prompts``) never shares a stream with the training set (``train-prompts``) of any seed."""
    if not 1 <= min_constraints <= max_constraints:
        raise ValueError(f"need 1 <= min_constraints <= max_constraints, got {min_constraints}, {max_constraints}")
    rng = random.Random(f"mrbench-ifollow:{stream_key(purpose, seed, index)}")
    base = rng.choice(BASE_REQUESTS)
    types = sample_types(rng, rng.randint(min_constraints, max_constraints))
    ctx: dict[str, Any] = {"used_words": set(), "capital_at_least_ok": "change_case:english_lowercase" not in types}
    order = sorted(range(len(types)), key=lambda i: (
        SAMPLE_ORDER.index(types[i]) if types[i] in SAMPLE_ORDER else len(SAMPLE_ORDER),
        types[i] == "keywords:letter_frequency", i))
    kwargs: dict[int, dict[str, Any]] = {}
    for i in order:
        kwargs[i] = POOL[types[i]][1](rng, ctx)
    forbidden = [i for i, t in enumerate(types) if t == "keywords:forbidden_words"]
    for i in forbidden:  # disjoint from every word another constraint asks for
        kwargs[i]["forbidden_words"] = [w for w in kwargs[i]["forbidden_words"] if w not in ctx["used_words"]]
    constraints = [(types[i], kwargs[i]) for i in range(len(types))]
    sentences = [get_constraint(cid).render(kw) for cid, kw in constraints]
    return ConstrainedPrompt(id=f"gen-{purpose}-{seed}-{index}", base=base, constraints=constraints,
                             sentences=list(sentences), prompt=render_prompt(base, sentences), source="generated")


def generate_prompts(n: int, seed: int = 0, min_constraints: int = 5, max_constraints: int = 7,
                     purpose: str = TRAIN_PROMPTS) -> list[ConstrainedPrompt]:
    """The first ``n`` prompts of the generated set for (``purpose``, ``seed``)."""
    return [generate_prompt(i, seed, min_constraints, max_constraints, purpose) for i in range(n)]
