"""IFBench ``words:*`` and ``sentence:*`` constraint types (18), with the official semantics.

Rules are stated per checker as IFBench's reference checker applies them, quirks included.
"Punctuation" always means ASCII punctuation (``string.punctuation``).
"""

from __future__ import annotations

import itertools
import re
import string
from collections import Counter

from tasks.ifollow.constraints.ifbench_common import (
    PUNCT_SPACE,
    as_int,
    ascii_without_letters,
    drop_punct,
    ifbench_type,
    punkt_sentences,
    sentence_spans,
    split_words_lower,
    treebank_words,
)
from tasks.ifollow.constraints.ifbench_lexicon import starts_with_verb

_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")
_PRIMES = frozenset({2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79,
                     83, 89, 97})


def ordinal(n: int) -> str:
    """'1-st', '22-nd', '23-rd', '11-th', '34-th': the ordinals IFBench's prompts print."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}-{suffix}"


def _alnum_tokens(text: str) -> list[str]:
    """Treebank tokens that contain at least one letter or digit (punctuation tokens dropped)."""
    if ascii_without_letters(text, digits_too=True):
        return []
    return [t for t in treebank_words(text) if any(ch.isalnum() for ch in t)]


@ifbench_type("words:alphabet", (), "Each word in your response must start with the next letter of the alphabet, "
                                    "looping back to 'A' after 'Z'.")
def alphabet(response: str) -> bool:
    """After deleting punctuation, word k+1 starts with the letter after word k's (z -> a).

    The first word must start with an ASCII letter; comparison is case-insensitive.
    """
    words = drop_punct(response).split()
    if not words:
        return False
    letter = words[0][0].lower()
    if letter not in string.ascii_lowercase:
        return False
    for word in words[1:]:
        letter = string.ascii_lowercase[(string.ascii_lowercase.index(letter) + 1) % 26]
        if word.lower()[0] != letter:
            return False
    return True


@ifbench_type("words:vowel", (), "Write a paragraph using words that contain only three types of vowels.")
def vowel(response: str) -> bool:
    """The stripped response is one line, and at most three of a, e, i, o, u occur in it (any case)."""
    lines = response.strip().split("\n")
    return len(lines) == 1 and len(set(lines[0].lower()) & set("aeiou")) <= 3


@ifbench_type("words:consonants", (), "Ensure each word in your response has at least one consonant cluster "
                                      "(two or more consonants together).")
def consonants(response: str) -> bool:
    """Every whitespace token (lower-cased, punctuation kept) has two adjacent ASCII consonants."""
    for word in response.lower().split():
        if not any(a in _CONSONANTS and b in _CONSONANTS for a, b in itertools.pairwise(word)):
            return False
    return True


def _alliteration_run(sentence: str) -> int:
    """Length-weighted alliteration score of a sentence, as IFBench counts it.

    Words are whitespace tokens with leading punctuation removed; each adjacent pair sharing a
    first letter adds 2 if it opens a run and 1 if it extends one (so a run of k words adds k).
    """
    words = [w.lstrip(PUNCT_SPACE) for w in sentence.lower().split()]
    words = [w for w in words if w]
    score, in_run = 0, False
    for a, b in itertools.pairwise(words):
        if a[0] == b[0]:
            score += 1 if in_run else 2
            in_run = True
        else:
            in_run = False
    return score


@ifbench_type("sentence:alliteration_increment", (), "Each sentence must have a longer sequence of consecutive "
                                                     "alliterative words than the previous one.")
def alliteration_increment(response: str) -> bool:
    """The alliteration score (total words in alliterative runs) strictly increases sentence by sentence.

    The first sentence only needs a score >= 0.
    """
    previous = -1
    for sentence in punkt_sentences(response):
        score = _alliteration_run(sentence)
        if score <= previous:
            return False
        previous = score
    return True


@ifbench_type("words:palindrome", (), "Include at least 10 single-word palindromes, each at least 5 characters long.")
def palindrome(response: str) -> bool:
    """At least 10 tokens (punctuation deleted, lower-cased, repeats counted) are palindromes of length >= 5."""
    words = drop_punct(response).lower().split()
    return sum(1 for w in words if len(w) >= 5 and w == w[::-1]) >= 10


@ifbench_type("words:prime_lengths", (), "Use only words with lengths that are prime numbers.")
def prime_lengths(response: str) -> bool:
    """Every whitespace token, punctuation deleted, has a prime length below 100."""
    return all(len(w) in _PRIMES for w in drop_punct(response).split())


@ifbench_type("words:start_verb", (), "The response must start with a verb.",
              description="the first Treebank token is a verb (offline verb lexicon replaces NLTK's POS "
                          "tagger: may differ from the official verdict on ambiguous words)")
def start_verb(response: str) -> bool:
    """The first Treebank token is a verb (lexicon substitute for NLTK's tagger, see ifbench_lexicon)."""
    if ascii_without_letters(response):  # no token with a letter: none is a verb
        return False
    tokens = treebank_words(response)
    return bool(tokens) and starts_with_verb(tokens[0])


@ifbench_type("words:repeats", ("small_n",), "The response should not repeat any word more than {small_n} times.")
def repeats(response: str, small_n: int) -> bool:
    """No word (lower-cased, punctuation deleted, whitespace-split) occurs more than small_n times."""
    counts = Counter(split_words_lower(response))
    return all(c <= as_int(small_n) for c in counts.values())


@ifbench_type("sentence:keyword", ("word", "N"),
              lambda kw: f"The response must include keyword {kw['word']} in the {kw['N']}-th sentence.")
def sentence_keyword(response: str, word: str, N: int) -> tuple[bool, list[tuple[int, int]]]:
    """The N-th Punkt sentence contains ``word`` as a whole word (case-insensitive)."""
    n = as_int(N)
    spans = sentence_spans(response)
    if n < 1 or len(spans) < n:
        return False, []
    start, end = spans[n - 1]
    found = re.search(r"\b" + re.escape(str(word)) + r"\b", response[start:end], re.IGNORECASE)
    return found is not None, [(start, end)]


@ifbench_type("words:odd_even_syllables", (), "Alternate between words with odd and even numbers of syllables.")
def odd_even_syllables(response: str) -> bool:
    """Syllable-count parities of consecutive words (punctuation deleted, lower-cased) alternate.

    Syllables are counted by ``syllapy`` (dictionary plus rules, shipped with the package), the
    counter IFBench uses.
    """
    import syllapy

    parities = [syllapy.count(w) % 2 for w in drop_punct(response).lower().split()]
    return all(a != b for a, b in itertools.pairwise(parities))


@ifbench_type("words:last_first", (), "In your response, the last word of each sentence must become the first word "
                                      "of the next sentence.")
def last_first(response: str) -> bool:
    """For consecutive Punkt sentences, last word of one == first word of the next (case-insensitive).

    Words are whitespace tokens after stripping punctuation/spaces from the sentence's end (resp.
    start); a sentence with no word fails. A single sentence satisfies it.
    """
    sentences = punkt_sentences(response)
    for left, right in itertools.pairwise(sentences):
        last = left.rstrip(PUNCT_SPACE).split()
        first = right.lstrip(PUNCT_SPACE).split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


@ifbench_type("words:paragraph_last_first", (), "Each paragraph of your response must end with the same word it "
                                                "started with, separate paragraphs with a newline.")
def paragraph_last_first(response: str) -> bool:
    """Every non-empty line, lower-cased and stripped of outer punctuation, starts and ends with the same token."""
    for line in response.split("\n"):
        words = line.strip().lower().strip(PUNCT_SPACE).split()
        if words and words[0] != words[-1]:
            return False
    return True


@ifbench_type("sentence:increment", ("small_n",), "Each sentence must contain exactly {small_n} more words than "
                                                  "the previous one.")
def increment(response: str, small_n: int) -> bool:
    """Word counts of consecutive Punkt sentences (punctuation deleted, whitespace-split) rise by exactly small_n."""
    counts = [len(drop_punct(s).split()) for s in punkt_sentences(response)]
    if not counts:
        return False
    step = as_int(small_n)
    return all(b == a + step for a, b in itertools.pairwise(counts))


@ifbench_type("words:no_consecutive", (), "No two consecutive words can share the same first letter.")
def no_consecutive(response: str) -> bool:
    """No two consecutive words (lower-cased, punctuation deleted, whitespace-split) share a first character."""
    words = split_words_lower(response)
    return all(a[0] != b[0] for a, b in itertools.pairwise(words))


@ifbench_type("words:keywords_specific_position", ("keyword", "n", "m"),
              lambda kw: f"Include keyword {kw['keyword']} in the {ordinal(as_int(kw['n']))} sentence, as the "
                         f"{ordinal(as_int(kw['m']))} word of that sentence.")
def keywords_specific_position(response: str, keyword: str, n: int, m: int) -> tuple[bool, list]:
    """The m-th word of the n-th Punkt sentence equals ``keyword`` (case-insensitive).

    Words are the sentence's Treebank tokens that contain a letter or digit.
    """
    n, m = as_int(n), as_int(m)
    spans = sentence_spans(response)
    if n < 1 or len(spans) < n:
        return False, []
    start, end = spans[n - 1]
    words = _alnum_tokens(response[start:end])
    if m < 1 or len(words) < m:
        return False, [(start, end)]
    return words[m - 1].lower() == str(keyword).strip().lower(), [(start, end)]


@ifbench_type("words:words_position", ("keyword",), "The second word in your response and the second to last word "
                                                    "in your response should be the word {keyword}.")
def words_position(response: str, keyword: str) -> bool:
    """The second Treebank token and the second-to-last word both equal ``keyword``, any case.

    Tokens are all Treebank tokens, punctuation included, so a comma after the first word is
    the second token. Only a final punctuation token is looked past: when the last token is a
    substring of ASCII punctuation (".", "!", ...), the second-to-last word is the third-to-last
    token, and fewer than three tokens fail. A single token fails. This is IFBench ``main``'s rule.
    """
    want = str(keyword).strip().lower()
    if want.isascii() and response.isascii() and want not in response.lower():
        return False  # no token can equal it (tokens are pieces of the text)
    tokens = treebank_words(response)
    if len(tokens) < 2:
        return False
    if tokens[-1] in string.punctuation:
        if len(tokens) < 3:
            return False
        last = tokens[-3]
    else:
        last = tokens[-2]
    return tokens[1].lower() == last.lower() == want
