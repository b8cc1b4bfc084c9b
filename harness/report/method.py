"""How a report's numbers and verdicts were computed, in words: the method note every output opens
with and the note under each difference table. Both name the test the verdicts came from (the
exact sign-flip test, or an adaptive sweep's anytime-valid p-values), the Holm family, and how rows
pool records (by configuration and numerics, or across versions on purpose)."""

from __future__ import annotations

from harness.report.stats import ALPHA, METHOD, POWER

#: Holm's family, as every output states it
FAMILY = ("Holm-corrected over one family per table: every row's comparison with the {baseline} row in every "
          "column of that table (the comparisons the verdict draws from; the gains over the base model in a "
          "table are a second family)")


def verdict_test(design) -> str:
    """What the verdicts come from, before Holm."""
    if design is None:
        return "the exact paired sign-flip permutation test"
    return "the anytime-valid p-values of the confidence sequences"


def _rows(pooled: bool) -> str:
    if pooled:
        return ("Rows: one per configuration, pooled across versions on purpose (--pool-across-versions): a row "
                "may mix records whose numerics differ (commit, versions, device; the verdict names the rows "
                "that do). ")
    return ("Rows: one per configuration and numerics (the same numerics fingerprint, or for records without "
            "one the same commit, dirty flag and versions); a row is compared only with the baseline and base "
            "rows of its own numerics (docs/comparability.md). ")


def _fixed(baseline: str, min_seeds: int, effect: float | None) -> str:
    effect_text = f"±{effect:g}" if effect is not None else "one point of the column's scale (±0.01 for shares)"
    return (f"Differences: from the {baseline} row on the same model, over the seeds both ran (mean difference "
            f"[95% paired t interval, scipy.stats.ttest_rel]), with what that interval rules out (a bootstrap "
            f"interval of a mean over 3 seeds cannot reach beyond the observed differences, so it would claim too "
            f"much; the JSON and CSV give it too). Verdicts: {verdict_test(None)} (scipy.stats.permutation_test "
            f"over all 2^n sign patterns; it cannot go below p = 2/2^n, 0.25 with 3 seeds), "
            f"{FAMILY.format(baseline=baseline)}; 'higher'/'lower' only where the corrected p is below {ALPHA:g}, "
            f"and 'no verdict possible' where the test cannot reach the threshold with that many seeds; below "
            f"{min_seeds} paired seeds: too few seeds to tell. Smallest detectable effect: the smallest difference "
            f"a paired t-test (level {ALPHA:g}) detects with {POWER:.0%} power with the seeds there are, at the "
            f"observed spread of the paired differences (noncentral t, scipy.stats.nct); leaderboard.json and .csv "
            f"also give the seeds that would detect {effect_text} (seeds_needed, at least the seeds the exact test "
            f"needs). Gain over base: from the base row, the untrained model evaluated through the same end-of-run "
            f"evaluation (benchmarks, held-out cases, decoding), one deterministic evaluation, so the interval "
            f"(one-sample t, scipy.stats.ttest_1samp) is over the trained row's seeds only. ")


def _adaptive(baseline: str, min_seeds: int, design) -> str:
    return (f"These records are an adaptive sweep's (mrbench sweep --until-resolved). Differences: from the "
            f"{baseline} row on the same model, over the seeds both ran, in seed order; gains: from the base row, "
            f"the untrained model evaluated through the same end-of-run evaluation (one deterministic evaluation, "
            f"so the interval is over the trained row's seeds only). Each has a {design.statement}, and what that "
            f"interval rules out. Verdicts: {verdict_test(design)} (any number of seeds can reach the threshold), "
            f"{FAMILY.format(baseline=baseline)}; 'higher'/'lower' only where the corrected p is below {ALPHA:g}; "
            f"below {min_seeds} paired seeds: too few seeds to tell. No verdict comes from a fixed-n test here: "
            f"p_perm in the JSON and CSV holds the anytime-valid p, and seeds_needed the seeds expected to resolve "
            f"±effect at the spread seen (the smallest detectable effect is not estimated). ")


def method_note(baseline: str, min_seeds: int, effect: float | None = None, design=None, pooled: bool = False) -> str:
    """The report's method paragraph: cells, differences, verdicts (test and family), rows, extras."""
    body = _fixed(baseline, min_seeds, effect) if design is None else _adaptive(baseline, min_seeds, design)
    return (f"Cells: {METHOD}; the best mean of each column in bold. {body}{_rows(pooled)}leaderboard.csv and "
            f".json also give the paired t-test's p, the bootstrap interval of each difference, the probability of improvement P(X > Y) "
            f"over the paired seeds (rliable.metrics.probability_of_improvement, bootstrap interval) and the "
            f"interquartile mean per cell and per row over seeds x columns (rliable.metrics.aggregate_iqm, "
            f"stratified bootstrap over each column's seeds).")


def diff_cell_note(design=None) -> str:
    """The note under a difference table: one number per cell, what its mark means, where the rest is."""
    rest = ("95% paired t interval, what the interval rules out, the verdict and the smallest effect these seeds "
            "can detect" if design is None else "95% confidence sequence, what it rules out and the verdict")
    return (f"One number per cell: the mean difference, over paired seeds (from the base model's value in a gain "
            f"table; ▲ / ▼: higher / lower by {verdict_test(design)}, Holm-corrected over the table's family; no "
            f"mark: no verdict). Its {rest} are in the notes under the table (and in a cell's tooltip on the "
            f"page).")
