"""``mrbench report``: paper-style results derived from run records (never edited by hand).

- :mod:`harness.report.collect`   finished records -> runs (eval numbers, final rewards, curves), grouped
                                  into rows across seeds; base records (the untrained model) into base rows;
                                  every value left out named
- :mod:`harness.report.pooling`   each record's numerics identity, which records a row may pool, and
                                  labels for what sets apart rows of one configuration
- :mod:`harness.report.stats`     summaries, intervals, paired and exact tests, probability of improvement,
                                  IQM, seeds needed, Holm-corrected verdicts over a family (scipy.stats and rliable)
- :mod:`harness.report.tables`    per-task tables, comparisons with the baseline and gains over the base
                                  row, steps to threshold
- :mod:`harness.report.verdict`   the verdict the report opens with, from its own tables
- :mod:`harness.report.figures`   learning curves (median over seeds, interquartile band), PNG and SVG
- :mod:`harness.report.method`    the method note and the table notes: the test, the family, the pooling
- :mod:`harness.report.render`    leaderboard.md and the texts every output shares
- :mod:`harness.report.export`    leaderboard.csv / .json (strict JSON)
- :mod:`harness.report.html`      the self-contained report.html
- :mod:`harness.report.command`   the command
"""
