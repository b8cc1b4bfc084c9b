"""The credit explorer: a reader of records, showing where each reward's credit went, token by
token. The rows it reads are written during training (:mod:`harness.training.credit_log`, in the
format of :mod:`harness.training.credit_rows`, stored by :mod:`harness.training.credit_store`);
which characters each token holds, and which tokens a verifier's character spans touch, is
:mod:`harness.token_align`, shared with the replay builders and the step diagnostics.

- :mod:`~harness.credit.replayed` -- responses sampled or given, scored and replayed by a model;
- :mod:`~harness.credit.page` -- the self-contained HTML page of ``mrbench credit``;
- :mod:`~harness.credit.stats`, :mod:`~harness.credit.report`, :mod:`~harness.credit.localize` --
  the paper's localisation analysis (Table 4, concentration, correlation) of ``mrbench localize``.
"""
