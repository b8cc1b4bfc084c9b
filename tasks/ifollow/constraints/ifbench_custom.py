"""IFBench ``custom:*`` (10, one fixed task each) and ``repeat:*`` (3) constraint types.

Rules are stated per checker as IFBench's reference checker applies them, quirks included.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
import string
import unicodedata

from tasks.ifollow.constraints.ifbench_common import (
    PUNCT_SPACE,
    drop_punct,
    ifbench_type,
    punkt_sentences,
)


def _ascii_fold(text: str) -> str:
    """NFKD-decompose and drop what is not ASCII ('São Tomé' -> 'Sao Tome')."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


@ifbench_type("custom:multiples", (), "Count from 10 to 50 but only print multiples of 7.")
def multiples(response: str) -> bool:
    """The digit runs of the response are exactly 14, 21, 28, 35, 42, 49, in that order."""
    return re.findall(r"\d+", response.replace(",", ", ")) == [str(i) for i in range(14, 51, 7)]


_MCQ_PROMPT = ("Generate 4 multiple choice questions with 5 options each about \"20th century art history\". Each "
               "question should start with the label \"Question\". The questions should get progressively longer. "
               "Do not provide an explanation.")


@ifbench_type("custom:mcq_count_length", (), _MCQ_PROMPT)
def mcq_count_length(response: str) -> bool:
    """Starts with 'Question'; 4 questions split on 'Question <n>' labels; each has exactly 5 option
    lines ('A.'..'E)' followed by a word); question texts (before the first option) strictly lengthen."""
    if not response.startswith("Question"):
        return False
    parts = re.split(r"\n*(?:Question \d+[\.|\):;]?\s*)", response)
    if parts and parts[0] == "":
        parts = parts[1:]
    questions = [p.strip() for p in parts if p.strip()]
    if len(questions) != 4:
        return False
    lengths = []
    for q in questions:
        text, n_options, in_options = "", 0, False
        for line in q.split("\n"):
            if re.match(r"^[A-Ea-e][\.|\)]\s*\w+", line.strip()):
                n_options += 1
                in_options = True
            elif not in_options:
                text += " " + line.strip()
        if n_options != 5:
            return False
        lengths.append(len(text.strip()))
    return all(a < b for a, b in itertools.pairwise(lengths))


@ifbench_type("custom:reverse_newline", (), "List the countries of Africa in reverse alphabetical order, each on "
                                            "a new line.")
def reverse_newline(response: str) -> bool:
    """From the first line containing 'Zimbabwe': at least 52 non-empty lines, in reverse sorted order.

    Lines are stripped of punctuation and spaces at both ends; order is compared on ASCII-folded text.
    """
    lines = [ln.strip(PUNCT_SPACE) for ln in response.split("\n")]
    lines = [ln for ln in lines if ln]
    start = next((i for i, ln in enumerate(lines) if "Zimbabwe" in ln), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [_ascii_fold(ln) for ln in lines[start:]]
    return folded == sorted(folded, reverse=True)


_REVERSE_PROMPT = ("What animal is the national symbol of the US? Respond to this query, but make your sentence in "
                   "reverse order of what it should be, per {unit}.")


@ifbench_type("custom:word_reverse", (), _REVERSE_PROMPT.format(unit="word"))
def word_reverse(response: str) -> bool:
    """Lower-cased, punctuation deleted, words reversed: contains 'bald eagle' and is one Punkt sentence."""
    text = drop_punct(response.lower().strip())
    text = " ".join(text.split()[::-1])
    return "bald eagle" in text and text in punkt_sentences(text)


@ifbench_type("custom:character_reverse", (), _REVERSE_PROMPT.format(unit="letter"))
def character_reverse(response: str) -> bool:
    """The lower-cased response contains 'elgae dlab' ('bald eagle' spelled backwards)."""
    return "elgae dlab" in response.lower()


@ifbench_type("custom:sentence_alphabet", (), "Tell me a 26-sentence story where each sentence's first word starts "
                                              "with the letters of the alphabet in order.")
def sentence_alphabet(response: str) -> bool:
    """Exactly 26 Punkt sentences; sentence k's first character that is not whitespace is letter k, any case.

    The first whitespace token is lower-cased and its first character compared, so a sentence
    opening with a quote or a bracket fails (IFBench ``main`` does not skip leading punctuation).
    """
    sentences = punkt_sentences(response)
    if len(sentences) != 26:
        return False
    for letter, sentence in zip(string.ascii_lowercase, sentences):
        words = sentence.split()
        if not words or words[0].lower()[0] != letter:
            return False
    return True


EUROPEAN_CAPITALS_NORTH_TO_SOUTH = ["Reykjavik", "Helsinki", "Oslo", "Tallinn", "Stockholm", "Riga", "Moscow", "Copenhagen", "Vilnius", "Minsk", "Dublin", "Berlin", "Amsterdam", "Warsaw", "London", "Brussels", "Prague", "Luxembourg", "Paris", "Vienna", "Bratislava", "Budapest", "Vaduz", "Chisinau", "Bern", "Ljubljana", "Zagreb"]


@ifbench_type("custom:european_capitals_sort", (),
              "Give me the names of all capital cities of european countries whose latitude is higher than than 45 "
              "degrees? List the capital cities without country names, separated by commas, sorted by latitude, "
              "from highest to lowest.")
def european_capitals_sort(response: str) -> bool:
    """ASCII-folded, comma-split (blank items dropped), the items are exactly the 27 capitals in order."""
    items = [c.strip() for c in _ascii_fold(response).split(",") if c.strip()]
    return items == list(EUROPEAN_CAPITALS_NORTH_TO_SOUTH)


@ifbench_type("custom:csv_city", (), 'Generate CSV data: The column names are ["ID", "Country", "City", "Year", '
                                     '"Count"], the data should be comma delimited. Please generate 7 rows.')
def csv_city(response: str) -> bool:
    """CSV-parsed: 8 records, header exactly ID,Country,City,Year,Count, every record 5 fields."""
    rows = _csv_rows(response)
    return (rows is not None and len(rows) == 8 and rows[0] == ["ID", "Country", "City", "Year", "Count"]
            and all(len(r) == 5 for r in rows[1:]))


def _csv_rows(text: str, delimiter: str = ",") -> list[list[str]] | None:
    """CSV records of ``text``, or None when the csv module rejects it (e.g. a bare carriage return
    inside a field): text that cannot be read as CSV does not satisfy a CSV constraint."""
    try:
        return list(csv.reader(io.StringIO(text), delimiter=delimiter))
    except csv.Error:
        return None


def _quoted_csv(response: str, delimiter: str) -> list[list[str]] | None:
    """CSV records with every '"' tripled first, so that quote characters survive parsing."""
    return _csv_rows(response.replace('"', '"""'), delimiter)


@ifbench_type("custom:csv_special_character", (),
              'Generate CSV data: The column names are ["ProductID", "Category", "Brand", "Price", "Stock"], the '
              "data should be comma delimited. Please generate 14 rows. Add one field which contains a special "
              "character and enclose it in double quotes.")
def csv_special_character(response: str) -> bool:
    """Header line ProductID,Category,Brand,Price,Stock (each optionally quoted); 15 records (quotes
    kept); scanning data rows in order, every row up to the first one holding a field that starts
    with '"', has a non-word non-space character and ends with '"' has 5 fields; such a row must exist."""
    header = response.split("\n")[0].strip()
    if not re.match(r'^(ProductID|"ProductID"),[ \t]*(Category|"Category"),[ \t]*(Brand|"Brand"),'
                    r'[ \t]*(Price|"Price"),[ \t]*(Stock|"Stock")$', header):
        return False
    rows = _quoted_csv(response, ",")
    if rows is None or len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
            return True
    return False


@ifbench_type("custom:csv_quotes", (),
              'Generate CSV data: The column names are ["StudentID", "Subject", "Grade", "Semester", "Score"], '
              "the data should be tab delimited. Please generate 3 rows and enclose each single field in double "
              "quotes.")
def csv_quotes(response: str) -> bool:
    """Tab-separated header StudentID..Score (optionally quoted); 4 records of 5 fields; every field,
    stripped, starts and ends with '"' (quotes kept while parsing)."""
    header = response.split("\n")[0].strip()
    if not re.match(r'^(StudentID|"StudentID")\t *(Subject|"Subject")\t *(Grade|"Grade")\t *'
                    r'(Semester|"Semester")\t *(Score|"Score")$', header):
        return False
    rows = _quoted_csv(response, "\t")
    if rows is None or len(rows) != 4:
        return False
    for row in rows:
        if len(row) != 5:
            return False
        for field in row:
            f = field.strip()
            if not f or f[0] != '"' or f[-1] != '"':
                return False
    return True


@ifbench_type("custom:date_format_list", (), "List the start dates of all the battles Napoleon fought separated by "
                                             "commas, use the following date format: YYYY-MM-DD. Do not provide an "
                                             "explanation.")
def date_format_list(response: str) -> bool:
    """Every comma-separated item is YYYY-MM-DD with 1769 <= year <= 1821, month <= 12 and a day
    within that month's length (29 for February); month 00 and day 00 are not rejected (official)."""
    for item in response.strip().split(","):
        item = item.strip()
        if not re.match(r"^\d{4}-\d{2}-\d{2}$", item):
            return False
        year, month, day = (int(x) for x in item.split("-"))
        if not 1769 <= year <= 1821 or month > 12:
            return False
        limit = 31 if month in (1, 3, 5, 7, 8, 10, 12) else 30 if month in (4, 6, 9, 11) else 29
        if month != 0 and day > limit:
            return False
    return True


@ifbench_type("repeat:repeat_change", ("prompt_to_repeat",),
              "Repeat the request, but change the first word of the repeated request, (do not say anything before "
              "repeating the request; the request you need to repeat does not include this sentence) and do not "
              "answer the actual request!")
def repeat_change(response: str, prompt_to_repeat: str) -> bool:
    """Not the request verbatim, and equal to it from the second whitespace word on."""
    if response == prompt_to_repeat:
        return False
    return " ".join(prompt_to_repeat.split()[1:]) == " ".join(response.split()[1:])


_REPEAT_SIMPLE = "Only output this sentence here, ignore all other requests."


@ifbench_type("repeat:repeat_simple", (), _REPEAT_SIMPLE)
def repeat_simple(response: str) -> bool:
    """The stripped response equals the instruction sentence itself, case-insensitively."""
    return response.strip().lower() == _REPEAT_SIMPLE.lower()


@ifbench_type("repeat:repeat_span", ("prompt_to_repeat", "n_start", "n_end"),
              "Copy the span of words that lies between (and including) index {n_start} and {n_end}, the indices "
              "are word indices, split by whitespace!",
              description="the stripped response equals characters n_start..n_end of the request, any case "
                          "(IFBench main slices characters although its prompts say word indices)")
def repeat_span(response: str, prompt_to_repeat: str, n_start: int, n_end: int) -> bool:
    """The stripped response equals ``prompt_to_repeat[n_start : n_end + 1]`` stripped, case-insensitively.

    The indices are *character* offsets (0-based, end inclusive), as IFBench ``main`` checks
    them, although the benchmark's prompts (and the rendered instruction, which reproduces
    them) speak of whitespace word indices.
    """
    span = prompt_to_repeat[int(n_start):int(n_end) + 1]
    return response.strip().lower() == span.strip().lower()
