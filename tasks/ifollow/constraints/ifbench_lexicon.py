"""Word lists the IFBench checkers need and that NLTK would download: offline substitutes.

- ``STOP_WORDS``: the English list of NLTK's ``stopwords`` corpus (the one IFBench's
  ``ratio:stop_words`` loads), written out here. IFBench tokenizes with ``\\w+``, so the list's
  apostrophe forms ("don't") can never match a token and only the apostrophe-free ones matter;
  they are listed all the same. Same list, same verdicts — but this is a substitute for a
  downloaded corpus, so the type's description flags it.
- ``starts_with_verb``: IFBench's ``words:start_verb`` asks NLTK's averaged-perceptron POS
  tagger (a downloaded model) whether the first Treebank token is tagged ``VB*``. Offline we use
  a lexicon of about 750 English base verbs plus irregular forms; a token is a verb when it is an
  irregular form or one of its inflection stems (-s, -es, -ies, -ed, -ied, -ing; final e restored,
  doubled consonant undone) is a listed verb, and a few words that are far more often nouns at the
  start of a response are ruled out. This is a heuristic: it may differ from the tagger on words
  it does not list or on ambiguous ones ("Studies", "Building", "Light").
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


_MORE_VERBS = """
abandon absorb accelerate accompany accomplish accumulate accuse acknowledge acquire adapt address adore
advance advocate aggregate align allocate alter amend amplify anticipate appear appoint approve articulate
ascend assemble assert assist attend attract audit augment authorize automate awaken balance bargain battle
bear beat become beg behave belong bend benefit bet bind bite blend bless block blow boil book boost borrow
bounce bow breathe breed broadcast browse brush burn burst bury calibrate calm cancel capture cast categorize
chain challenge chant charge chart chase chat cheer chew circle cite claim classify climb clip coach code
collaborate command comment commit communicate compete complain comply comprehend compress conceive
concentrate condense conduct confess configure confront conquer conserve consist consult consume contain
contemplate contend contrast control convey convince cooperate coordinate cope correct correspond cost cough
counsel cover crack crash crawl cry cultivate cure curate customize cycle damage dance dare debate debug
decline decorate decrease dedicate defeat defend delay delegate delight demand deny depart depend deploy
deposit derive descend deserve desire destroy detect devise devote diagnose dig dine direct disagree
disappear discard disclose discourage dismiss display dissect distinguish distribute disturb divide dominate
donate double doubt drag drain dress drift drill dry dwell educate elaborate elect elevate eliminate embark
embody emerge emit employ empower empty enact encounter endure enforce enlist enrich enroll entertain envision
equip erase escape evolve exaggerate exceed excel exchange excite exclude execute exercise exhibit exist exit
expose extract fail fascinate fasten favor fear feed fetch fight figure file filter finalize fit flee flip
float flood flow fly fold forecast forgive format foster frame free freeze frighten fuel function gain gaze
gesture glance glow govern grant grasp greet grind guarantee guard hang harness harvest heal heat hesitate
hide hire hit honor hope host hug hunt hurry hurt hypothesize ignite imitate immerse impact impose impress
incline infer influence inherit initiate inject innovate inquire inspect instruct intend interact interpret
interrupt invent invest involve isolate iterate judge justify kick kiss kneel knit knock label lack land
last laugh lean leap lend level license light link load loan lock log march marry master match matter mean
mediate memorize mend migrate mimic mix mold motivate mount mourn multiply narrate negotiate nest nominate
nurture obey object obscure occupy occur omit operate oppose optimize orchestrate originate overcome oversee
pack parse partner paste pause perceive permit persist persuade photograph pinpoint pioneer pitch plant plead
please plot plunge polish ponder pose possess post pour praise pray predict preserve press pretend price
prioritize probe process program progress project prompt pronounce propose prosper publish punish pursue
qualify quantify question quote race rank rate react rebuild recite reckon reconcile recount recover recruit
redesign reform regain register regret regulate reinforce reject rejoice relate rely remind render renew
rent repair reproduce rescue resemble reside resist resolve respect restore restrict resume retain retire
retrieve reveal reverse ring risk roam roar roll rotate rub rule rush sail satisfy scan scatter schedule
score scratch scream screen seal search secure seem seize sense separate settle shake shape shift shine
shoot shout shrink shut sigh sign signal simplify simulate sink skip slide slip smell smile solve sound
spark spin split spread squeeze stabilize stack stare steal steer stick stimulate stir strengthen stretch
strike strip strive structure stumble succeed suffer suit surround survey survive suspect sustain swallow
swear sweep swim swing switch tackle tag target taste tear tend terminate thrive tie tighten tolerate touch
trace trade transfer transition translate transmit trap trigger trim trust tune twist uncover undergo
undertake unfold unify unite unlock unveil upgrade uphold urge validate value vanish vary venture visualise
volunteer vote wander warm warn wash waste weave weigh whirl whirr whisper widen wind withdraw witness wrap
yell zoom
""".split()

BASE_VERBS: frozenset[str] = frozenset(_BASE_VERBS) | frozenset(_MORE_VERBS)
_IRREGULAR_SET = frozenset(_IRREGULAR)


def _stems(word: str) -> set[str]:
    """Candidate base forms of ``word`` under English inflection (-s, -es, -ies, -ed, -ied, -ing,
    with a restored final e and an undoubled final consonant)."""
    out = {word}
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ing", "")):
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            stem = word[: -len(suffix)] + repl
            out |= {stem, stem + "e"}
            if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "aeiou":
                out.add(stem[:-1])
    return out


def starts_with_verb(first_token: str) -> bool:
    """Whether ``first_token`` (the first Treebank token of a response) reads as a verb.

    Lexicon lookup, case-insensitive: an irregular verb form, or a word one of whose inflection
    stems is a listed base verb; a few words that are usually nouns at a response's start are
    ruled out. See the module docstring for how this substitutes for NLTK's POS tagger.
    """
    word = first_token.lower()
    if word in _NOT_AT_START:
        return False
    return word in _IRREGULAR_SET or bool(_stems(word) & BASE_VERBS)
