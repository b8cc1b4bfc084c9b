"""Where each reward's credit goes, token by token (which characters each token holds, and which
tokens a verifier's character spans touch, is :mod:`harness.token_align`, shared with the replay
builders and the step diagnostics).

- :mod:`~harness.credit.rows` -- the compact per-response record: tokens, per reward the verdict,
  the tokens its checker read, the relevance q and the weight w, and the final advantage;
- :mod:`~harness.credit.store` -- ``credit.jsonl``, appended once per training step;
- :mod:`~harness.credit.trainlog` -- the training hook that logs a few groups per step;
- :mod:`~harness.credit.replayed` -- responses sampled or given, scored and replayed by a model;
- :mod:`~harness.credit.page` -- the self-contained HTML page of ``mrbench credit``;
- :mod:`~harness.credit.stats`, :mod:`~harness.credit.report`, :mod:`~harness.credit.localize` --
  the paper's localisation analysis (Table 4, concentration, correlation) of ``mrbench localize``.
"""
