"""IFBench ``count:*`` and ``ratio:*`` constraint types (14), with the official semantics.

Each checker's docstring states the rule as IFBench's reference checker applies it, quirks
included (the verdict must match the official one, not an idealised reading). Sentences are
Punkt sentences (``nltk.sent_tokenize``), "\\w+ words" are IFEval's word count, "Treebank tokens"
are ``nltk.word_tokenize`` tokens — all computed offline by :mod:`tasks.ifollow.textutil`.
"""

from __future__ import annotations

import re
from collections import Counter

from tasks.ifollow import textutil
from tasks.ifollow.constraints.ifbench_common import (
    PUNCT_SPACE,
    as_int,
    drop_punct,
    ifbench_type,
    punkt_sentences,
    treebank_words,
)
from tasks.ifollow.constraints.ifbench_lexicon import STOP_WORDS

_CONJUNCTIONS = frozenset({"and", "but", "for", "nor", "or", "so", "yet"})

PERSON_NAMES = ["Emma", "Liam", "Sophia", "Jackson", "Olivia", "Noah", "Ava", "Lucas", "Isabella", "Mason", "Mia", "Ethan", "Charlotte", "Alexander", "Amelia", "Benjamin", "Harper", "Leo", "Zoe", "Daniel", "Chloe", "Samuel", "Lily", "Matthew", "Grace", "Owen", "Abigail", "Gabriel", "Ella", "Jacob", "Scarlett", "Nathan", "Victoria", "Elijah", "Layla", "Nicholas", "Audrey", "David", "Hannah", "Christopher", "Penelope", "Thomas", "Nora", "Andrew", "Aria", "Joseph", "Claire", "Ryan", "Stella", "Jonathan"]

PRONOUNS = frozenset(
    # personal, possessive, reflexive, demonstrative, interrogative, relative, indefinite
    ["i", "me", "we", "us", "you", "he", "him", "she", "her", "it", "they", "them", "my", "mine", "our", "ours", "your", "yours", "his", "hers", "its", "their", "theirs", "myself", "ourselves", "yourself", "yourselves", "himself", "herself", "itself", "themselves", "this", "that", "these", "those", "who", "whom", "whose", "which", "what", "whoever", "whomever", "whatever", "whichever", "anybody", "anyone", "anything", "everybody", "everyone", "everything", "nobody", "nothing", "somebody", "someone", "something", "each", "either", "neither", "both", "all", "some", "any", "none"]
)


@ifbench_type("count:word_count_range", ("min_words", "max_words"),
              "The response must contain between {min_words} and {max_words} words.")
def word_count_range(response: str, min_words: int, max_words: int) -> bool:
    """min_words <= (number of \\w+ words) <= max_words."""
    return as_int(min_words) <= textutil.count_words(response) <= as_int(max_words)


@ifbench_type("count:unique_word_count", ("N",), "Use at least {N} unique words in the response.")
def unique_word_count(response: str, N: int) -> bool:
    """|{w.strip(punctuation + ' ') for w in response.lower().split()}| >= N.

    Official quirk kept: a token made only of punctuation becomes the empty string, which
    counts as one more "unique word".
    """
    unique = {w.strip(PUNCT_SPACE) for w in response.lower().split()}
    return len(unique) >= as_int(N)


@ifbench_type("ratio:stop_words", ("percentage",),
              "Ensure that stop words constitute no more than {percentage}% of the total words in your response.",
              description="100 * stop-word \\w+ tokens / all \\w+ tokens <= percentage (NLTK's English "
                          "stop-word list shipped offline: a substitute for the downloaded corpus)")
def stop_words(response: str, percentage: float) -> bool:
    """100 * (\\w+ tokens whose lower case is an NLTK English stop word) / (\\w+ tokens) <= percentage.

    No words at all fails. The stop-word list is shipped in :mod:`ifbench_lexicon` (NLTK's
    corpus is a separate download, which the checkers must not need).
    """
    tokens = textutil.WORD_RE.findall(response)
    if not tokens:
        return False
    stops = sum(1 for t in tokens if t.lower() in STOP_WORDS)
    return stops / len(tokens) * 100 <= float(percentage)  # IFBench's order of operations


def _sentence_endings(response: str) -> Counter:
    return Counter(s[-1] for s in punkt_sentences(response) if s)


@ifbench_type("ratio:sentence_type", (),
              "Maintain a 2:1 ratio of declarative to interrogative sentences in your response.")
def sentence_type(response: str) -> bool:
    """(#Punkt sentences ending in '.') == 2 * (#ending in '?'). Zero of both satisfies it (official)."""
    ends = _sentence_endings(response)
    return ends["."] == 2 * ends["?"]


@ifbench_type("ratio:sentence_balance", (),
              "Ensure that the ratio of sentence types (declarative, interrogative, exclamatory) in your response "
              "is balanced.")
def sentence_balance(response: str) -> bool:
    """#sentences ending in '.' == #ending in '?' == #ending in '!' (Punkt sentences)."""
    ends = _sentence_endings(response)
    return ends["."] == ends["?"] == ends["!"]


@ifbench_type("count:conjunctions", ("small_n",),
              "Use at least {small_n} different coordinating conjunctions in the response.")
def conjunctions(response: str, small_n: int) -> bool:
    """Distinct whitespace tokens that are a coordinating conjunction once stripped of punctuation.

    Official quirk kept: distinctness is over the raw tokens, so "and", "And" and "and," count as
    three different conjunctions.
    """
    found = {w for w in response.split() if w.strip(PUNCT_SPACE).lower() in _CONJUNCTIONS}
    return len(found) >= as_int(small_n)


def _render_person_names(kw: dict) -> str:
    return (f"Mention at least {kw['N']} different person names in the response, from this list of person "
            f"names: {', '.join(PERSON_NAMES)} .")


@ifbench_type("count:person_names", ("N",), _render_person_names)
def person_names(response: str, N: int) -> tuple[bool, list[tuple[int, int]]]:
    """At least N distinct names of the fixed list occur as whole words (case-sensitive)."""
    spans = []
    for name in PERSON_NAMES:
        if name not in response:  # a fast substring test first: one regex scan per name is slow on long text
            continue
        m = re.search(r"\b" + re.escape(name) + r"\b", response)
        if m:
            spans.append(m.span())
    return len(spans) >= as_int(N), sorted(spans)


def char_trigrams(text: str) -> set[str]:
    """The set of 3-character windows of ``text``, whitespace and punctuation included."""
    return {text[i:i + 3] for i in range(len(text) - 2)}


@ifbench_type("ratio:overlap", ("reference_text", "percentage"),
              "Maintain a trigram overlap of {percentage}% (±2%) with the provided reference text.")
def overlap(response: str, reference_text: str, percentage: float) -> bool:
    """(|T(resp) ∩ T(ref)| / |T(resp)|) * 100 within [percentage - 2, percentage + 2], bounds included.

    T = the set of *character* trigrams of the raw text (IFBench ``main`` applies its n-gram
    function to the strings themselves). A response shorter than three characters has no
    trigram and fails. The ratio is formed, then scaled by 100, in that order, so that values
    at a bound (e.g. 7/100 * 100 = 7.000000000000001) fall on the same side as IFBench's.
    """
    mine = char_trigrams(response)
    if not mine:
        return False
    ratio = len(mine & char_trigrams(str(reference_text))) / len(mine) * 100
    return float(percentage) - 2 <= ratio <= float(percentage) + 2


@ifbench_type("count:numbers", ("N",), "Include exactly {N} numbers in the response.")
def numbers(response: str, N: int) -> bool:
    """After deleting ASCII punctuation ("3.5" -> "35", "1,000" -> "1000"), #runs of digits == N."""
    return len(re.findall(r"\d+", drop_punct(response))) == as_int(N)


@ifbench_type("count:punctuation", (),
              "Use every standard punctuation mark at least once, including semicolons, colons, "
              "and the interrobang (?!).")
def punctuation(response: str) -> bool:
    """An interrobang ("?!", "!?" or "‽") occurs, and . , ! ? ; : all occur outside that first one.

    The first "?!" (else the first "!?") is removed before the six marks are looked for, so
    a lone "?!" does not by itself provide "?" and "!".
    """
    if not ("?!" in response or "!?" in response or "‽" in response):
        return False
    rest = response.replace("?!", "", 1)
    if len(rest) == len(response):
        rest = response.replace("!?", "", 1)
    return {".", ",", "!", "?", ";", ":"} <= set(rest)


def _japanese_ordinal(n: int) -> str:
    # Official wording, its slips included: "Nth word" only in the default form.
    if n % 10 == 1:
        return f"Every {n}st of your response must be in Japanese."
    if n % 10 == 2:
        return f"Every {n}nd of your response must be in Japanese."
    if n % 10 == 3:
        return f"Every {n}rd of your response must be in Japanese."
    return f"Every {n}th word of your response must be in Japanese."


_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


@ifbench_type("count:words_japanese", ("N",), lambda kw: _japanese_ordinal(as_int(kw["N"])))
def words_japanese(response: str, N: int) -> bool:
    """Every N-th whitespace token (1-based), stripped of punctuation, contains kana or a CJK ideograph.

    Tokens that strip to nothing or are all digits are exempt. N <= 0 cannot be satisfied.
    """
    n = as_int(N)
    if n <= 0:
        return False
    for i, token in enumerate(response.split(), start=1):
        word = token.strip(PUNCT_SPACE)
        if i % n == 0 and word and not word.isdigit() and not _JAPANESE.search(word):
            return False
    return True


@ifbench_type("count:pronouns", ("N",), "The response should include at least {N} pronouns.")
def pronouns(response: str, N: int) -> bool:
    """#Treebank tokens of the lower-cased response (with '/' read as a space) in the pronoun list >= N."""
    text = response.lower().replace("/", " ")
    if not any(p in text for p in PRONOUNS):  # Treebank tokens are pieces of the text: none can be a pronoun
        return 0 >= as_int(N)
    tokens = treebank_words(text)
    return sum(1 for t in tokens if t in PRONOUNS) >= as_int(N)


@ifbench_type("count:keywords_multiple", ("keyword1", "keyword2", "keyword3", "keyword4", "keyword5"),
              "Include keyword {keyword1} once in your response, keyword {keyword2} twice in your response, "
              "keyword {keyword3} three times in your response, keyword {keyword4} five times in your "
              "response, and keyword {keyword5} seven times in your response.")
def keywords_multiple(response: str, keyword1: str, keyword2: str, keyword3: str, keyword4: str,
                      keyword5: str) -> tuple[bool, list[tuple[int, int]]]:
    """Occurrences of keyword1..5 are exactly 1, 2, 3, 5 and 7.

    An occurrence is a case-insensitive substring match, counted without overlaps (``str.count``
    on the lower-cased texts; each keyword stripped of outer whitespace): "cat" also counts
    inside "cats" and "concatenate", as in IFBench ``main``.
    """
    text = response.lower()
    spans: list[tuple[int, int]] = []
    ok = True
    for kw, want in zip((keyword1, keyword2, keyword3, keyword4, keyword5), (1, 2, 3, 5, 7)):
        needle = str(kw).strip().lower()
        ok = ok and text.count(needle) == want
        if needle:  # spans on the lower-cased text, clamped (lower-casing can lengthen a few characters)
            n = len(response)
            spans += [(min(m.start(), n), min(m.end(), n)) for m in re.finditer(re.escape(needle), text)]
    return ok, sorted(spans)
