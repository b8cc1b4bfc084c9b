"""IFBench count:*, ratio:*, words:* and sentence:* types: hand-computed (response, kwargs, strict, loose) tables.

Every expected verdict was worked out by hand from IFBench's official rule on its ``main``
branch (stated in each checker's docstring); comments give the count that decides it.
"""

from __future__ import annotations

import pytest

import tasks.ifollow.constraints.ifbench  # noqa: F401  (registers the types)
from tasks.ifollow.constraints.base import check

# 102 distinct characters: 100 distinct character trigrams.
_DISTINCT = "".join(chr(0x4E00 + i) for i in range(102))


def case(cid, response, kwargs, strict, loose=None, note=""):
    return pytest.param(cid, response, kwargs, strict, strict if loose is None else loose, id=f"{cid}|{note}")


CASES = [
    # count:word_count_range — \w+ words
    case("count:word_count_range", "one two three", {"min_words": 3, "max_words": 5}, True, note="3 words"),
    case("count:word_count_range", "one two three four five six", {"min_words": 3, "max_words": 5}, False, note="6"),
    case("count:word_count_range", "don't stop", {"min_words": 3, "max_words": 5}, True, note="don,t,stop"),
    case("count:word_count_range", "Intro line here ok\none two\nend", {"min_words": 3, "max_words": 5},
         False, True, note="7 strict; first line dropped 3"),
    # count:unique_word_count
    case("count:unique_word_count", "a b c", {"N": 3}, True, note="3 unique"),
    case("count:unique_word_count", "A a, a.", {"N": 3}, False, note="case+punct fold to 1"),
    case("count:unique_word_count", "a b -", {"N": 3}, True, note="'-' strips to '' which counts"),
    case("count:unique_word_count", "Ünï ünï Çé", {"N": 3}, False, note="unicode lower: 2"),
    # ratio:stop_words
    case("ratio:stop_words", "the cat sat", {"percentage": 50}, True, note="1/3"),
    case("ratio:stop_words", "the and of cat", {"percentage": 50}, False, note="3/4"),
    case("ratio:stop_words", "!!!", {"percentage": 50}, False, note="no words"),
    case("ratio:stop_words", "The THE cat dog", {"percentage": 50.0}, True, note="2/4 boundary, case"),
    # ratio:sentence_type
    case("ratio:sentence_type", "I like it. You too. Why?", {}, True, note="2 decl 1 q"),
    case("ratio:sentence_type", "Yes. Why? How?", {}, False, note="1 vs 2"),
    case("ratio:sentence_type", "no punctuation at all", {}, True, note="0 == 2*0"),
    case("ratio:sentence_type", "Title line?\nIt works. It runs. Why not?", {}, False, True,
         note="2:2 strict, 2:1 without first line"),
    # ratio:sentence_balance
    case("ratio:sentence_balance", "Go. Why? Wow!", {}, True, note="1,1,1"),
    case("ratio:sentence_balance", "Go. Why?", {}, False, note="1,1,0"),
    case("ratio:sentence_balance", "words without ending", {}, True, note="0,0,0"),
    # count:conjunctions
    case("count:conjunctions", "cats and dogs but no birds", {"small_n": 2}, True, note="and, but"),
    case("count:conjunctions", "cats and dogs and birds", {"small_n": 2}, False, note="and only"),
    case("count:conjunctions", "and And", {"small_n": 2}, True, note="raw tokens differ (official)"),
    # count:person_names
    case("count:person_names", "Emma met Liam.", {"N": 2}, True, note="2 names"),
    case("count:person_names", "Emma and emma", {"N": 2}, False, note="case-sensitive"),
    case("count:person_names", "Emmanuel and Leon", {"N": 1}, False, note="whole words only"),
    case("count:person_names", "Zoe, Zoe and Mia", {"N": 2}, True, note="distinct"),
    # ratio:overlap — character trigrams of the raw strings (IFBench main)
    case("ratio:overlap", "abcd", {"reference_text": "abcx", "percentage": 50}, True,
         note="{abc,bcd} vs {abc,bcx}: 1/2"),
    case("ratio:overlap", "abcd", {"reference_text": "abcd", "percentage": 50}, False, note="100%"),
    case("ratio:overlap", "abcd", {"reference_text": "abcd", "percentage": 99.0}, True, note="100 within 97..101"),
    case("ratio:overlap", "the cat", {"reference_text": "cat the", "percentage": 40}, True,
         note="2 of 5 char trigrams (the, cat); no word trigram at all"),
    case("ratio:overlap", "aaaa", {"reference_text": "aaa", "percentage": 100}, True, note="{aaa}: a set"),
    case("ratio:overlap", "ab", {"reference_text": "ab", "percentage": 0}, False,
         note="no trigram fails even at 0%"),
    case("ratio:overlap", _DISTINCT, {"reference_text": _DISTINCT[:9], "percentage": 5}, False,
         note="7/100*100 = 7.000000000000001 > 7"),
    case("ratio:overlap", _DISTINCT, {"reference_text": _DISTINCT[:9], "percentage": 9}, True,
         note="7.000000000000001 >= 7"),
    # count:numbers
    case("count:numbers", "I have 3 cats and 4 dogs", {"N": 2}, True, note="3,4"),
    case("count:numbers", "Pi is 3.14", {"N": 2}, False, note="'314' once punctuation goes"),
    case("count:numbers", "1,000 and 2", {"N": 2}, True, note="1000, 2"),
    case("count:numbers", "\u0663 and 4", {"N": 2}, True, note="Arabic-Indic digit is \\d"),
    # count:punctuation
    case("count:punctuation", "Hi, you; ok: yes. Really?! No! Why?", {}, True, note="all six + ?!"),
    case("count:punctuation", "Hi, you; ok: yes. Really?!", {}, False, note="?! consumed: no lone ! ?"),
    case("count:punctuation", "Hi, you; ok: yes. What\u203d No! Why?", {}, True, note="interrobang char"),
    case("count:punctuation", "Hi, you; ok: yes. No! Why?", {}, False, note="no interrobang"),
    # count:words_japanese
    case("count:words_japanese", "I 猫 like 犬", {"N": 2}, True, note="2nd,4th Japanese"),
    case("count:words_japanese", "I cat like 犬", {"N": 2}, False, note="2nd English"),
    case("count:words_japanese", "I 42 like こんにちは", {"N": 2}, True, note="digits exempt"),
    case("count:words_japanese", "日本 語", {"N": 1}, True, note="every word"),
    # count:pronouns
    case("count:pronouns", "I think you like it", {"N": 3}, True, note="i you it"),
    case("count:pronouns", "The cat sat", {"N": 3}, False, note="0"),
    case("count:pronouns", "she/her/hers", {"N": 3}, True, note="slash splits"),
    case("count:pronouns", "I'm HERE with THEM", {"N": 3}, False, note="i, them = 2"),
    # count:keywords_multiple — case-insensitive substring counts (str.count)
    case("count:keywords_multiple", "cat dog dog owl owl owl bee bee bee bee bee ant ant ant ant ant ant ant",
         dict(keyword1="cat", keyword2="dog", keyword3="owl", keyword4="bee", keyword5="ant"), True,
         note="1,2,3,5,7"),
    case("count:keywords_multiple", "Cat cats DOG dog owl owl owl bee bee bee bee bee ant ant ant ant ant ant ant",
         dict(keyword1="cat", keyword2="dog", keyword3="owl", keyword4="bee", keyword5="ant"), False,
         note="'cat' also inside 'cats': 2"),
    case("count:keywords_multiple", "Concatenate DOG dog owl owl owl bee bee bee bee bee ant ant ant ant ant ant ant",
         {"keyword1": "cat", "keyword2": "dog", "keyword3": "owl", "keyword4": "bee", "keyword5": "ant"}, True,
         note="'cat' inside 'Concatenate' counts"),
    case("count:keywords_multiple", "cat dog owl bee ant",
         dict(keyword1="cat", keyword2="dog", keyword3="owl", keyword4="bee", keyword5="ant"), False, note="1 each"),
    # words:alphabet
    case("words:alphabet", "Apple banana cherry", {}, True, note="a b c"),
    case("words:alphabet", "Apple cherry", {}, False, note="skips b"),
    case("words:alphabet", "Zebra apple, Bear", {}, True, note="wraps z->a, case"),
    case("words:alphabet", "1 apple", {}, False, note="starts with digit"),
    # words:vowel
    case("words:vowel", "I am a cat", {}, True, note="i,a"),
    case("words:vowel", "quiet house", {}, False, note="u,i,e,o"),
    case("words:vowel", "cat\ndog", {}, False, True, note="two lines; loose drops one"),
    case("words:vowel", "  cat  \n", {}, True, note="trailing whitespace stripped"),
    # words:consonants
    case("words:consonants", "strength blocks", {}, True, note="str, bl"),
    case("words:consonants", "strength a", {}, False, note="'a'"),
    case("words:consonants", "Crwth! school, tree.", {}, True, note="case, punct kept"),
    # sentence:alliteration_increment
    case("sentence:alliteration_increment", "Big dog. Silly sunny snake.", {}, True, note="0 then 3"),
    case("sentence:alliteration_increment", "Silly sunny snake. Big dog.", {}, False, note="3 then 0"),
    case("sentence:alliteration_increment", "One sentence only.", {}, True, note="0 > -1"),
    case("sentence:alliteration_increment", "Big dog. Red cat.", {}, False, note="0 then 0"),
    # words:palindrome
    case("words:palindrome", "level radar civic kayak refer madam rotor stats tenet sagas", {}, True, note="10"),
    case("words:palindrome", "level radar civic", {}, False, note="3"),
    case("words:palindrome", "Level, RADAR! civic kayak refer madam rotor stats tenet sagas", {}, True,
         note="case and punctuation"),
    case("words:palindrome", "wow mom dad pop eve gag nun tot bob sis", {}, False, note="all shorter than 5"),
    # words:prime_lengths
    case("words:prime_lengths", "hi cat house", {}, True, note="2,3,5"),
    case("words:prime_lengths", "a cat", {}, False, note="1"),
    case("words:prime_lengths", "it's odd", {}, True, note="its=3"),
    case("words:prime_lengths", "naïve", {}, True, note="unicode length 5"),
    # words:start_verb (lexicon substitute)
    case("words:start_verb", "Write the essay now.", {}, True, note="imperative"),
    case("words:start_verb", "The essay is written.", {}, False, note="determiner"),
    case("words:start_verb", "Imagine a world.", {}, True, note="imperative 2"),
    case("words:start_verb", "Considering it, yes.", {}, True, note="-ing form"),
    case("words:start_verb", "Sure!\nWrite it.", {}, False, True, note="loose drops 'Sure!'"),
    # words:repeats
    case("words:repeats", "a b a", {"small_n": 2}, True, note="a twice"),
    case("words:repeats", "a a a b", {"small_n": 2}, False, note="a thrice"),
    case("words:repeats", "The the THE", {"small_n": 2}, False, note="case folded"),
    case("words:repeats", "the, the. cat", {"small_n": 2}, True, note="punct deleted"),
    # sentence:keyword
    case("sentence:keyword", "I run. The cat sleeps.", {"word": "cat", "N": 2}, True, note="2nd sentence"),
    case("sentence:keyword", "The cat runs. I sleep.", {"word": "cat", "N": 2}, False, note="1st sentence"),
    case("sentence:keyword", "One sentence with cat.", {"word": "cat", "N": 2}, False, note="too few"),
    case("sentence:keyword", "I run. The CAT sleeps.", {"word": "cat", "N": 2}, True, note="case"),
    case("sentence:keyword", "I run. Concatenate.", {"word": "cat", "N": 2}, False, note="whole word"),
    # words:odd_even_syllables (syllapy: cat 1, apple 2, dog 1)
    case("words:odd_even_syllables", "cat apple dog", {}, True, note="1,2,1"),
    case("words:odd_even_syllables", "cat dog", {}, False, note="1,1"),
    case("words:odd_even_syllables", "Cat!", {}, True, note="single word"),
    # words:last_first
    case("words:last_first", "I like cats. Cats like fish.", {}, True, note="cats/Cats"),
    case("words:last_first", "I like cats. Dogs like fish.", {}, False, note="cats/Dogs"),
    case("words:last_first", "Just one sentence.", {}, True, note="single sentence"),
    # words:paragraph_last_first
    case("words:paragraph_last_first", "Time waits for no one, time", {}, True, note="time..time"),
    case("words:paragraph_last_first", "Cat sat\nDog ran dog", {}, False, True, note="cat..sat; loose drops it"),
    case("words:paragraph_last_first", "Love is love.\n\nHope keeps HOPE!", {}, True, note="blank line, case"),
    # sentence:increment
    case("sentence:increment", "I run. I run fast. I run very fast.", {"small_n": 1}, True, note="2,3,4"),
    case("sentence:increment", "I run. I run.", {"small_n": 1}, False, note="2,2"),
    case("sentence:increment", "Go!", {"small_n": 3}, True, note="one sentence"),
    # words:no_consecutive
    case("words:no_consecutive", "cats eat fish", {}, True, note="c,e,f"),
    case("words:no_consecutive", "big bad wolf", {}, False, note="b,b"),
    case("words:no_consecutive", "Big, bad", {}, False, note="case/punct"),
    case("words:no_consecutive", "Apple; banana", {}, True, note="a,b"),
    # words:keywords_specific_position
    case("words:keywords_specific_position", "Hello there. I see cat now.", {"keyword": "cat", "n": 2, "m": 3},
         True, note="I see CAT"),
    case("words:keywords_specific_position", "Hello there. I see a cat.", {"keyword": "cat", "n": 2, "m": 3},
         False, note="3rd is 'a'"),
    case("words:keywords_specific_position", "I see cat.", {"keyword": "cat", "n": 2, "m": 3}, False,
         note="one sentence"),
    case("words:keywords_specific_position", "Hello. I, see CAT!", {"keyword": "cat", "n": 2, "m": 3}, True,
         note="commas are not words; case"),
    # words:words_position — all Treebank tokens; only a final punctuation token is looked past
    case("words:words_position", "A cat sees the cat too.", {"keyword": "cat"}, True, note="'.' looked past"),
    case("words:words_position", "A cat sees a dog.", {"keyword": "cat"}, False, note="2nd-last 'a'"),
    case("words:words_position", "cat", {"keyword": "cat"}, False, note="one word"),
    case("words:words_position", "The CAT likes Cat food!", {"keyword": "cat"}, True, note="case, '!' looked past"),
    case("words:words_position", "Hello, cat and cat ok", {"keyword": "cat"}, False, note="',' is token 2"),
    case("words:words_position", "A cat sees cat ...", {"keyword": "cat"}, True,
         note="'...' is not a substring of string.punctuation: it is the last word"),
    case("words:words_position", 'A cat sees cat."', {"keyword": "cat"}, False,
         note="closing '' token is not punctuation: 2nd-last is '.'"),
    case("words:words_position", "A cat sees cat?!", {"keyword": "cat"}, True, note="'!' looked past: 'cat' 3rd-last"),
    case("words:words_position", "A cat sees cat ok?!", {"keyword": "cat"}, False,
         note="only '!' looked past: 3rd-last is 'ok'"),
    case("words:words_position", "Hi.", {"keyword": "hi"}, False, note="punctuation and fewer than 3 tokens"),
]


@pytest.mark.parametrize("cid,response,kwargs,strict,loose", CASES)
def test_table(cid, response, kwargs, strict, loose):
    assert check(cid, response, kwargs).ok is strict
    assert check(cid, response, kwargs, loose=True).ok is loose


def test_every_type_in_this_file_has_three_cases():
    from collections import Counter

    counts = Counter(p.values[0] for p in CASES)
    prefixes = ("count:", "ratio:", "words:", "sentence:")
    from tasks.ifollow.constraints.ifbench import IFBENCH_IDS

    mine = [i for i in IFBENCH_IDS if i.startswith(prefixes) and i != "ratio:sentence_words"]
    assert len(mine) == 29
    assert {i: counts[i] for i in mine if counts[i] < 3} == {}
