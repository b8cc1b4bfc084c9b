"""IFBench ``format:*`` constraint types (14) and ``ratio:sentence_words``, with the official semantics.

Rules are stated per checker as IFBench's reference checker applies them, quirks included.
"""

from __future__ import annotations

import itertools
import re

from tasks.ifollow.constraints.ifbench_common import (
    PUNCT,
    PUNCT_SPACE,
    ascii_without_letters,
    drop_punct,
    ifbench_type,
    punkt_sentences,
    treebank_words,
)


@ifbench_type("format:parentheses", (), "Nest parentheses (and [brackets {and braces}]) at least 5 levels deep.")
def parentheses(response: str) -> bool:
    """A correctly matched group of (), [] and {} reaches depth >= 5 and is then closed.

    Scanning left to right with a stack: a closer that does not match the top opener resets the
    stack and the depth reached; the first matching close after depth 5 was reached succeeds.
    """
    stack: list[str] = []
    deepest = 0
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in response:
        if ch in "([{":
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in pairs:
            if stack and stack[-1] == pairs[ch]:
                stack.pop()
                if deepest >= 5:
                    return True
            else:
                stack, deepest = [], 0
    return False


@ifbench_type("format:quotes", (), "Include quotes within quotes within quotes, at least 3 levels deep, "
                                   "alternating between double quotes and single quotes.")
def quotes(response: str) -> bool:
    """Quotes nest >= 3 deep: a ' or " equal to the innermost open quote closes it, any other opens one.

    Succeeds as soon as a close brings the depth 3 or more below the deepest depth reached.
    """
    stack: list[str] = []
    deepest = 0
    for ch in response:
        if stack and ch == stack[-1]:
            stack.pop()
            if deepest - len(stack) >= 3:
                return True
        elif ch in "\"'":
            stack.append(ch)
            deepest = max(deepest, len(stack))
    return False


def _options_list(options: str) -> tuple[list[str], bool]:
    """IFBench's reading of an options string: (options, strict).

    strict when the string starts like "a ... b ... c" (letter choices), compared exactly;
    separator "/" if present, else "or" if the substring occurs, else ",".
    """
    strict = re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options) is not None
    sep = "/" if "/" in options else ("or" if "or" in options else ",")
    return [o.strip() for o in options.split(sep)], strict


@ifbench_type("format:options", ("options",),
              "Answer with one of the following options: {options}. Do not give any explanation.")
def options(response: str, options: str) -> bool:
    """The response is one of the options.

    Letter options ("a), b), c), d)"): the raw response must equal one option exactly.
    Text options: compare lower-cased, stripped of punctuation and spaces at both ends.
    """
    choices, strict = _options_list(str(options))
    if strict:
        return response in choices
    answer = response.strip(PUNCT_SPACE).lower()
    return any(c.strip(PUNCT_SPACE).lower() == answer for c in choices)


@ifbench_type("format:newline", (), "Write each word on a new line.")
def newline(response: str) -> bool:
    """After deleting punctuation: #non-empty lines == #whitespace tokens (one word per line)."""
    text = drop_punct(response).strip()
    lines = [ln for ln in text.split("\n") if ln != ""]
    return len(lines) == len(text.split())


def _is_emoji(ch: str) -> bool:
    import emoji

    return bool(emoji.is_emoji(ch))


@ifbench_type("format:emoji", (), "Please use an emoji at the end of every sentence.")
def emoji_end(response: str) -> bool:
    """Each Punkt sentence, punctuation deleted and stripped, ends in an emoji (last or second-last char).

    Punkt often attaches an emoji after the period to the next sentence, so a sentence also passes
    when the next sentence starts with an emoji. An empty (punctuation-only) sentence fails.
    Emoji identity follows the ``emoji`` package, as IFBench's does.
    """
    sentences = [drop_punct(s).strip() for s in punkt_sentences(response)]
    for i, s in enumerate(sentences):
        if not s:
            return False
        if _is_emoji(s[-1]) or _is_emoji(s[-2] if len(s) > 1 else s[-1]):
            continue
        if i == len(sentences) - 1:
            return False
        following = sentences[i + 1]
        if not following or not _is_emoji(following[0]):
            return False
    return True


@ifbench_type("ratio:sentence_words", (), "Respond with three sentences, all containing the same number of "
                                          "characters but using all different words.")
def sentence_words(response: str) -> bool:
    """Exactly 3 Punkt sentences of equal stripped length (characters).

    "All different words" is not checked: IFBench ``main`` accepts "Cat. Cat. Cat.".
    """
    sentences = punkt_sentences(response)
    return len(sentences) == 3 and len({len(s.strip()) for s in sentences}) == 1


@ifbench_type("format:line_indent", (), "Create stairs by incrementally indenting each new line.")
def line_indent(response: str) -> bool:
    """Leading-space count strictly increases from each line to the next.

    Blank lines are dropped the way IFBench's loop drops them: removing while iterating, so of two
    adjacent blank lines the second is skipped and kept (and then breaks the stairs).
    """
    lines = response.split("\n")
    i = 0
    while i < len(lines):  # emulates `for line in lines: if blank: lines.remove(line)`
        if not lines[i].strip():
            lines.remove(lines[i])
        i += 1
    indents = [len(ln) - len(ln.lstrip(" ")) for ln in lines]
    return all(b > a for a, b in itertools.pairwise(indents))


_CURLY_DOUBLE = str.maketrans({"\u201c": '"', "\u201d": '"'})


@ifbench_type("format:quote_unquote", (), "Every quoted phrase must be followed by an unquoted explanation.")
def quote_unquote(response: str) -> bool:
    """No two quoted phrases touch and the response does not end on a quote.

    Curly double quotes count as '"'; the literal '\\'"\\'' (talking about the character) is
    ignored; all whitespace is removed; then '""' must not occur, and after stripping digits and
    punctuation other than '"' from both ends, the last character must not be '"'.
    """
    text = response.translate(_CURLY_DOUBLE).replace("'\"'", "")
    text = "".join(text.split())
    if '""' in text:
        return False
    core = text.strip("0123456789" + PUNCT.replace('"', ""))
    return not (core and core[-1] == '"')


@ifbench_type("format:list", ("sep",), "Answer with a list of items, instead of bullet points use {sep}.")
def special_list(response: str, sep: str) -> bool:
    """The separator string occurs at least twice (anywhere)."""
    return len(re.findall(re.escape(str(sep)), response)) >= 2


@ifbench_type("format:thesis", (), "Each section must begin with a thesis statement in italics, use HTML to "
                                   "indicate the italics.")
def thesis(response: str) -> bool:
    """From the first <i> (else <em>): a closing </i> (else </em>) follows, with non-blank text between
    and after.

    Offsets follow IFBench: the thesis is read from 3 characters after the opening tag's start and
    the rest from 4 characters after the closing tag's start, whichever tag was found.
    """
    at = response.find("<i>")
    if at == -1:
        at = response.find("<em>")
        if at == -1:
            return False
    text = response[at:]
    close = text.find("</i>")
    if close == -1:
        close = text.find("</em>")
        if close == -1:
            return False
    return text[3:close].strip() != "" and text[close + 4:].strip() != ""


@ifbench_type("format:sub-bullets", (), "Your response must include bullet points denoted by * and at least one "
                                        "sub-bullet point denoted by - for each bullet point.")
def sub_bullets(response: str) -> bool:
    """Every piece after a '*' (splitting the response on '*') contains a '-'.

    Official quirk kept: a response with no '*' at all passes.
    """
    return all("-" in piece for piece in response.split("*")[1:])


@ifbench_type("format:no_bullets_bullets", (), "Your answer must contain at least two sentences ending in a period "
                                               "followed by at least two bullet points denoted by *.")
def no_bullets_bullets(response: str) -> bool:
    """Text with >= 2 Punkt sentences, then >= 2 lines starting with '*', and nothing else after.

    Lines are read in order: a '*' line before two sentences fails; a text line after a '*'
    line fails. Official quirk kept: an empty text line ends the text part (a later text line fails).
    """
    in_text = True
    n_sentences = n_bullets = 0
    for line in response.split("\n"):
        if line.strip().startswith("*"):
            in_text = False
            if n_sentences < 2:
                return False
            n_bullets += 1
        elif in_text:
            found = punkt_sentences(line.strip())
            n_sentences += len(found)
            in_text = bool(found)
        else:
            return False
    return n_bullets >= 2


@ifbench_type("format:title_case", (), "Write the entire response in title case (capitalize the first letter of "
                                       "every major word).")
def title_case(response: str) -> bool:
    """No Treebank token starting with a letter is a one-letter lower-case word, all lower case, or
    a lower-case letter followed by upper case. Minor words are not exempt (official)."""
    if ascii_without_letters(response):  # no token starts with a letter
        return True
    for word in treebank_words(response):
        if not word or not word[0].isalpha():
            continue
        if len(word) == 1:
            if word.islower():
                return False
            continue
        head, tail = word[0], word[1:]
        if head.isupper() and tail.islower():
            continue
        if head.islower() and (tail.isupper() or tail.islower()):
            return False
    return True


@ifbench_type("format:output_template", (), "Use this exact template for your response: My Answer: [answer] "
                                            "My Conclusion: [conclusion] Future Outlook: [outlook]")
def output_template(response: str) -> tuple[bool, list[tuple[int, int]]]:
    """'My Answer:', 'My Conclusion:' and 'Future Outlook:' all occur (case-sensitive, any order)."""
    marks = ("My Answer:", "My Conclusion:", "Future Outlook:")
    found = [(response.find(m), response.find(m) + len(m)) for m in marks if m in response]
    return len(found) == 3, found


@ifbench_type("format:no_whitespace", (), "The output should not contain any whitespace.")
def no_whitespace(response: str) -> bool:
    """No character of the response is whitespace (``str.isspace``)."""
    return not any(ch.isspace() for ch in response)
