"""All 58 IFBench constraint types: importing this module registers them in ``CONSTRAINTS``.

Ids and kwargs names are exactly those of IFBench's ``IFBench_test.jsonl`` (``instruction_id_list``
and ``kwargs``). The types live in four modules by kind:

- :mod:`ifbench_count`  ``count:*`` and ``ratio:*`` counting rules;
- :mod:`ifbench_words`  ``words:*`` and ``sentence:*``;
- :mod:`ifbench_format` ``format:*`` and ``ratio:sentence_words``;
- :mod:`ifbench_custom` ``custom:*`` (one fixed task each) and ``repeat:*``.

The rules are those of IFBench's ``main`` branch (commit db69a6f, ``ifbench/instructions.py``),
quirks included. IFBench's unmerged pull request #34 (word trigrams for ``ratio:overlap`` and five
other changes) is not followed; ``tests/test_ifbench_differential.py`` pins the difference.

Two types need downloaded NLTK data; so that no download is needed they use shipped substitutes
(:mod:`ifbench_lexicon`): ``ratio:stop_words`` (NLTK's English stop-word list, written out: same
verdicts) and ``words:start_verb`` (a verb lexicon instead of NLTK's POS tagger: may differ on
ambiguous first words). Their descriptions say so.
"""

from __future__ import annotations

from tasks.ifollow.constraints import ifbench_count, ifbench_custom, ifbench_format, ifbench_words  # noqa: F401
from tasks.ifollow.constraints.base import CONSTRAINTS

#: Every IFBench constraint id, sorted (the tests walk them: differential, fuzz and type checks).
IFBENCH_IDS: tuple[str, ...] = tuple(n for n in CONSTRAINTS.names() if CONSTRAINTS.get(n).family == "ifbench")

