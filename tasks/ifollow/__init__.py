"""Multi-constraint instruction following (task ``ifollow``; evaluators in :mod:`evals.ifollow`).

Reading order:

- :mod:`tasks.ifollow.textutil`      offline sentences (Punkt), IFEval words, seeded langdetect, loose variants
- :mod:`tasks.ifollow.constraints`   one registry of constraint types (IFEval, IFBench, MulDimIF)
  and :func:`~tasks.ifollow.constraints.check` (strict / loose)
- :mod:`tasks.ifollow.template`      the concatenation template; P_all and P_\\k
- :mod:`tasks.ifollow.hir_template`  HiR's six concatenation templates (HIR-16K's P_all and P_\\k)
- :mod:`tasks.ifollow.generator`     the project's seeded training prompts (default training set)
- :mod:`tasks.ifollow.witness`       a response satisfying all of a prompt's constraints (tests, warm starts)
- :mod:`tasks.ifollow.rows`          reading official ``instruction_id_list``/``kwargs`` rows, with clear errors
- :mod:`tasks.ifollow.hir`           HIR-16K rows (type1: IFEval checks, type2: IFBench checks) from JSONL or the hub
- :mod:`tasks.ifollow.task`          :class:`~tasks.ifollow.task.InstructionFollowingTask`
"""
