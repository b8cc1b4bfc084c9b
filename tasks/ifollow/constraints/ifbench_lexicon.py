"""Word lists the IFBench checkers need and that NLTK would download: offline substitutes.

- ``STOP_WORDS``: the English list of NLTK's ``stopwords`` corpus (the one IFBench's
  ``ratio:stop_words`` loads), written out here. IFBench tokenizes with ``\\w+``, so the list's
  apostrophe forms ("don't") can never match a token and only the apostrophe-free ones matter;
  they are listed all the same. Same list, same verdicts — but this is a substitute for a
  downloaded corpus, so the type's description flags it.
- ``starts_with_verb``: IFBench's ``words:start_verb`` asks NLTK's averaged-perceptron POS
  tagger (a downloaded model) whether the first Treebank token is tagged ``VB*``. Offline we use
  a lexicon of English verbs (base forms plus regular and irregular inflections) and rule out
  words that are far more often another part of speech at the start of a response. This is a
  heuristic and may differ from the tagger on ambiguous words (e.g. "Building", "Light").
"""

from __future__ import annotations

STOP_WORDS: frozenset[str] = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves
he him his himself she she's her hers herself it it's its itself they them their theirs themselves
what which who whom this that that'll these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don don't should should've
now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn
hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
he'd he'll he's i'd i'll i'm i've it'd it'll she'd she'll they'd they'll they're they've we'd
we'll we're we've
""".split())

# Base forms of common English verbs, chosen for how responses and imperatives begin.
_BASE_VERBS = """
accept achieve act add adjust admit adopt advise affect agree aim allow analyze analyse answer
apply appreciate approach argue arrange ask assess assign assume attach attempt avoid be become
begin believe bring build buy calculate call care carry catch cause celebrate change check choose
clarify clean close collect combine come compare compile complete compose compute conclude
confirm connect consider construct contact continue contribute convert cook copy count craft
create cut deal decide define delete deliver demonstrate describe design detail determine develop
discover discuss dive do draft draw dream drink drive drop earn eat edit embrace emphasize enable
encourage end engage enhance enjoy ensure enter establish estimate evaluate examine expand expect
experience explain explore express extend face fall feel fill find finish fix focus follow forget
form formulate gather generate get give go grab grow guess guide handle happen hate have hear help
highlight hold identify ignore illustrate imagine implement improve include incorporate increase
indicate inform insert inspire install integrate introduce investigate invite join jump keep kill
know launch lay lead learn leave let lie lift like limit list listen live locate look lose love
maintain make manage map mark measure meet mention merge mind minimize modify monitor move name
navigate need note notice observe obtain offer open order organize outline own paint participate
pass pay perform pick picture place plan play point practice practise prefer prepare present
prevent print proceed produce promote protect prove provide pull purchase push put raise reach
read realize recall receive recognize recommend record reduce reflect refer refuse regard
relax release remain remember remove repeat rephrase replace reply report represent request
require research respond rest restate return review revise rewrite ride rise run save say see
seek select sell send serve set share show sing sit sketch sleep solve sort speak specify spend
stand start state stay step stop store study submit suggest summarize summarise supply support
suppose take talk teach tell test thank think throw track train transform translate travel treat
try turn understand update use utilize verify visit visualize wait wake walk want watch wear
welcome win wish wonder work worry write yield
""".split()

_IRREGULAR = """
am is are was were been being has had having does did done doing went gone made took taken came
gave given got gotten saw seen knew known thought told found felt left kept began begun brought
bought built caught chose chosen drew drawn drove driven ate eaten fell fallen held led lost meant
met paid ran rose risen said sat sent shown sang sung slept spoke spoken spent stood taught threw
thrown understood woke woken won wore worn wrote written let put set cut read hit
""".split()

# Words of the lexicon's inflected forms that are usually something else at a response's start.
_NOT_AT_START = frozenset({"building", "light", "rest", "face", "name", "mind", "state", "set", "form",
                           "order", "point", "record", "present", "report", "sort", "list", "step",
                           "note", "map", "end", "well", "mark", "love", "dream", "picture"})


def _inflections(base: str) -> set[str]:
    forms = {base}
    if base.endswith("e") and not base.endswith("ee"):
        forms |= {base + "s", base + "d", base[:-1] + "ing"}
    elif base.endswith("y") and len(base) > 2 and base[-2] not in "aeiou":
        forms |= {base[:-1] + "ies", base[:-1] + "ied", base + "ing"}
    elif base.endswith(("s", "sh", "ch", "x", "z", "o")):
        forms |= {base + "es", base + "ed", base + "ing"}
    else:
        forms |= {base + "s", base + "ed", base + "ing"}
    return forms


VERB_FORMS: frozenset[str] = frozenset(
    {form for base in _BASE_VERBS for form in _inflections(base)} | set(_IRREGULAR)
)


def starts_with_verb(first_token: str) -> bool:
    """Whether ``first_token`` (the first Treebank token of a response) reads as a verb.

    Lexicon lookup, case-insensitive; see the module docstring for how this substitutes for
    NLTK's POS tagger and where it may disagree.
    """
    word = first_token.lower()
    if word in _NOT_AT_START:
        return False
    return word in VERB_FORMS
