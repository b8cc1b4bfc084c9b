"""``mrbench report``: paper-style results derived from run records (never edited by hand).

- :mod:`harness.report.collect`   finished records -> runs (eval numbers, final rewards, curves), grouped
                                  into rows across seeds
- :mod:`harness.report.stats`     mean, std, bootstrap intervals over seeds, seed-paired comparisons
- :mod:`harness.report.tables`    per-task tables, comparisons with the baseline, steps to threshold
- :mod:`harness.report.figures`   learning curves (median over seeds, interquartile band), PNG and SVG
- :mod:`harness.report.render`    leaderboard.md / .csv / .json
- :mod:`harness.report.html`      the self-contained report.html
- :mod:`harness.report.command`   the command
"""
