"""Text-to-SQL (paper Section 5.1): Spider-family and BIRD data on a read-only SQLite sandbox.

Modules, in the order a training step uses them:

- :mod:`~tasks.text2sql.data` -- official benchmark layouts, database resolution, skip reasons;
- :mod:`~tasks.text2sql.schema` -- the schema shown to the model (from the database, or tables.json);
- :mod:`~tasks.text2sql.templates` -- the prompt and the verifier blocks (Appendix C);
- :mod:`~tasks.text2sql.task` -- :class:`~tasks.text2sql.task.Text2SQLTask` (the ``text2sql`` task);
- :mod:`~tasks.text2sql.extract` -- the format check and reading SQL out of a response;
- :mod:`~tasks.text2sql.sandbox` -- read-only, time/row/byte-limited query execution;
- :mod:`~tasks.text2sql.worker` -- the same in a worker process (mrbench_core.budget_worker), killed when a query overruns;
- :mod:`~tasks.text2sql.sqltext` -- statements and clause spans (sqlglot), text rules of Spider's execution match;
- :mod:`~tasks.text2sql.match` -- result equality (Spider test-suite and BIRD semantics);
- :mod:`~tasks.text2sql.verify` -- the three verifiers and the reference-result cache.

The benchmark evaluators are in :mod:`evals.text2sql`.
"""
