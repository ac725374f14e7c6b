"""Statistics for benchmark results, all in one module so every number in a report has one source.

Conventions: an invalid answer counts as wrong in accuracy (never dropped) and is reported
separately as the invalid rate. Intervals are 95% unless `level` says otherwise.

References:
- Wilson score interval for proportions (statsmodels `proportion_confint`): unlike Wald it
  neither collapses to 0-0 at 0/n nor spans [0, 1] at small n. Every proportion keeps the Wald
  `se` = sqrt(p(1-p)/n) too, so a CHNB-style table can show p ± z·se, labelled Wald; where that
  Wald interval degenerates (`wald_degenerate`: zero width at 0/n or n/n, or reaching past 0 or 1
  at small n) a table shows the Wilson interval in its place.
- Film-clustered standard errors: cluster-robust (CR1) variance of a mean, items grouped by
  film (Cameron & Miller 2015); questions about one film are not independent. Computed with
  statsmodels OLS on an intercept, `cov_type="cluster"`. Below MIN_FILMS films the clustered
  interval is not given (its `reason` says "too few films (N)"): with two films the between-film
  variance rests on two residual sums, and two films of 2/3 each give a zero-width interval.
- McNemar's test for paired accuracies (statsmodels `mcnemar`; exact binomial when the
  discordant pairs are fewer than 25, else chi-square with continuity correction), with
  Newcombe's score interval for the difference of paired proportions (Newcombe 1998, Statist.
  Med. 17:2635, method 10: the two Wilson intervals combined with the correlation of the pairs,
  corrected as there), which stays within [-1, 1] where the Wald interval overshoots.
- Paired bootstrap of score differences (scipy `bootstrap`, percentile interval).
- MF² pairwise accuracy, TPR, TNR and unparseable share (Zaranis et al. 2025).
- NEST per-relation precision / recall / F1 and the flashback subset.
- Judge scores: mean with a Student-t interval.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import TypedDict, cast

import numpy as np
from scipy import stats

from ..foundation.errors import MovieMemError
from .records import EstimateLine, PairedLine

# The JSON shapes of the scores below that belong to one benchmark (MF²'s claim pairs, NEST's relations): kept
# here, beside what computes them, so the run log's records (records.py) know no format.


class ClaimScoresLine(TypedDict):
    """metrics.ClaimScores as JSON: MF²'s scores of a configuration (or of one group of its items)."""

    pairs: int
    pairwise: EstimateLine
    tpr: EstimateLine
    tnr: EstimateLine
    unparseable: EstimateLine


class PRFLine(TypedDict):
    """metrics.PRF as JSON: one relation type's precision, recall and F1."""

    precision: float
    recall: float
    f1: float
    support: int
    predicted: int


class FlashbackScores(TypedDict):
    n: int
    accuracy: EstimateLine
    prf: PRFLine | None  # None: no item's gold or predicted label is flashback


class RelationScores(TypedDict):
    """metrics.relation_scores: NEST's per-type P/R/F1, micro and macro, and the flashback subset."""

    per_type: dict[str, PRFLine]
    micro: PRFLine
    macro: PRFLine
    flashback: FlashbackScores


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise MovieMemError(f"confidence level must be in (0, 1), not {level}")
    return float(stats.norm.ppf(0.5 + level / 2))


MIN_FILMS = 5  # below this many films a film-clustered interval is not given: too few clusters to estimate


@dataclass(frozen=True)
class Estimate:
    """A proportion or mean with its interval. `se` is the standard error the interval uses; `reason`
    says why there is no interval (NaN bounds) where that is not just an empty sample."""

    n: int
    value: float
    ci_low: float
    ci_high: float
    se: float
    k: float | None = None  # successes, for proportions
    reason: str | None = None

    def to_dict(self) -> EstimateLine:
        """As JSON holds it; `reason` only where set, so an estimate with its interval reads as before."""
        d = asdict(self)
        if self.reason is None:
            del d["reason"]
        return cast(EstimateLine, d)

    def fmt(self, pct: bool = True) -> str:
        if self.n == 0 or math.isnan(self.value):
            return "n/a"
        scale, digits = (100, 1) if pct else (1, 2)
        if math.isnan(self.ci_low) or math.isnan(self.ci_high):
            return f"{scale * self.value:.{digits}f}" + (f"; {self.reason}" if self.reason else "")
        return f"{scale * self.value:.{digits}f} ± {scale * (self.ci_high - self.ci_low) / 2:.{digits}f}"


NAN = float("nan")


def _empty() -> Estimate:
    return Estimate(0, NAN, NAN, NAN, NAN, 0)


def wald(k: float, n: int, level: float = 0.95) -> Estimate:
    """Proportion k/n with the Wald interval, clipped to [0, 1]."""
    if n <= 0:
        return _empty()
    if not 0 <= k <= n:
        raise MovieMemError(f"successes {k} outside 0..{n}")
    p = k / n
    se = math.sqrt(p * (1 - p) / n)
    z = _z(level)
    return Estimate(n, p, max(0.0, p - z * se), min(1.0, p + z * se), se, k)


def wald_degenerate(k: float, n: int, level: float = 0.95) -> bool:
    """Whether the Wald interval p ± z·se of k/n is degenerate: zero width (k = 0 or k = n, the
    "0.0 ± 0.0" of a perfect or null score) or reaching past 0 or 1 (small n), where a table shows
    the Wilson interval in its place."""
    if n <= 0:
        return True
    p = k / n
    half = _z(level) * math.sqrt(p * (1 - p) / n)
    return k <= 0 or k >= n or p - half < 0 or p + half > 1


def wilson(k: float, n: int, level: float = 0.95) -> Estimate:
    """Proportion k/n with the Wilson score interval; `se` is the Wald standard error."""
    from statsmodels.stats.proportion import proportion_confint

    est = wald(k, n, level)
    if n <= 0:
        return est
    low, high = proportion_confint(k, n, alpha=1 - level, method="wilson")
    # rounding can put a bound a hair past p at 0/n or n/n
    return Estimate(n, est.value, max(0.0, min(float(low), est.value)), min(1.0, max(float(high), est.value)), est.se, k)


def _bools(values: Sequence[bool | None]) -> np.ndarray:
    """Correctness flags; None (invalid / unscored) counts as wrong."""
    return np.array([bool(v) for v in values], dtype=float)


def accuracy(correct: Sequence[bool | None], level: float = 0.95) -> Estimate:
    """Share of correct answers with the 95% Wilson interval; invalid (None) counts as wrong."""
    x = _bools(correct)
    return wilson(float(x.sum()), len(x), level)


def clustered_se(values: Sequence[float] | np.ndarray, clusters: Sequence[Hashable]) -> float:
    """Cluster-robust (CR1) standard error of the mean of `values`, grouped by `clusters`."""
    import statsmodels.api as sm

    y = np.asarray(values, dtype=float)
    if len(y) != len(clusters):
        raise MovieMemError(f"{len(y)} values but {len(clusters)} cluster labels")
    if len(y) < 2:
        return NAN
    codes = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)[1]
    if codes.max() < 1:
        return NAN  # one cluster: no between-cluster variance to estimate
    fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    return float(fit.bse[0])


def clustered_accuracy(correct: Sequence[bool | None], films: Sequence[Hashable], level: float = 0.95,
                       min_films: int = MIN_FILMS) -> Estimate:
    """Accuracy with a Wald-type interval from film-clustered standard errors; below `min_films` films no
    interval (NaN bounds, `reason` "too few films (N)"): a handful of clusters gives no usable variance."""
    x = _bools(correct)
    if len(x) == 0:
        return _empty()
    if len(x) != len(films):
        raise MovieMemError(f"{len(x)} values but {len(films)} cluster labels")
    p, k = float(x.mean()), float(x.sum())
    n_films = len({str(f) for f in films})
    if n_films < max(2, min_films):
        return Estimate(len(x), p, NAN, NAN, NAN, k, f"too few films ({n_films})")
    se = clustered_se(x, films)
    if math.isnan(se):
        return Estimate(len(x), p, NAN, NAN, NAN, k)
    z = _z(level)
    return Estimate(len(x), p, max(0.0, p - z * se), min(1.0, p + z * se), se, k)


def invalid_rate(invalid: Sequence[bool], level: float = 0.95) -> Estimate:
    x = np.array([bool(v) for v in invalid], dtype=float)
    return wilson(float(x.sum()), len(x), level)


def per_category(correct: Sequence[bool | None], categories: Sequence[str | None],
                 level: float = 0.95) -> dict[str, Estimate]:
    """Accuracy per category (items without one are grouped under 'uncategorised')."""
    if len(correct) != len(categories):
        raise MovieMemError(f"{len(correct)} answers but {len(categories)} categories")
    groups: dict[str, list[bool | None]] = defaultdict(list)
    for c, cat in zip(correct, categories):
        groups[cat if cat else "uncategorised"].append(c)
    return {cat: accuracy(v, level) for cat, v in sorted(groups.items())}


# ----------------------------------------------------------------------------- paired comparisons


@dataclass(frozen=True)
class Paired:
    """A minus B on the same items. For accuracy: n10 = A right and B wrong, n01 = the reverse."""

    n: int
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    statistic: float = NAN
    n10: int | None = None
    n01: int | None = None
    interval: str = ""  # how ci_low..ci_high was made: newcombe (paired proportions), bootstrap-percentile

    def to_dict(self) -> PairedLine:
        d: PairedLine = {"n": self.n, "diff": self.diff, "ci_low": self.ci_low, "ci_high": self.ci_high,
                         "p_value": self.p_value, "test": self.test, "statistic": self.statistic, "n10": self.n10,
                         "n01": self.n01}
        if self.interval:
            d["interval"] = self.interval
        return d


def newcombe_paired(n11: int, n10: int, n01: int, n00: int, level: float = 0.95) -> tuple[float, float]:
    """Newcombe's score interval for p_A - p_B on paired items (Newcombe 1998, Statist. Med. 17:2635,
    method 10), from the counts both right, only A right, only B right, both wrong.

    The Wilson intervals (l1, u1) of p_A and (l2, u2) of p_B are combined as
    L = d - sqrt((p_A - l1)^2 - 2 phi (p_A - l1)(u2 - p_B) + (u2 - p_B)^2) and U likewise, with phi the
    correlation of the pairs, (n11 n00 - n10 n01) / sqrt of the four margins' product, taken as 0 where a
    margin is empty and, where positive, reduced by n/2 (never below 0) as Newcombe does. Each square root
    is at most the sum of the two Wilson arms, so L >= -1 and U <= 1 (the bounds are still clipped for
    rounding): the Wald interval's +104% cannot happen.
    """
    n = n11 + n10 + n01 + n00
    if n <= 0:
        return NAN, NAN
    a_right, b_right = n11 + n10, n11 + n01
    pa, pb = a_right / n, b_right / n
    wa, wb = wilson(a_right, n, level), wilson(b_right, n, level)
    margins = a_right * (n - a_right) * b_right * (n - b_right)
    cross = n11 * n00 - n10 * n01
    if margins == 0:
        phi = 0.0
    elif cross > 0:
        phi = max(cross - n / 2, 0.0) / math.sqrt(margins)
    else:
        phi = cross / math.sqrt(margins)
    d = pa - pb

    def arm(x: float, y: float) -> float:
        return math.sqrt(max(0.0, x * x - 2 * phi * x * y + y * y))

    low = d - arm(pa - wa.ci_low, wb.ci_high - pb)
    high = d + arm(wa.ci_high - pa, pb - wb.ci_low)
    return max(-1.0, low), min(1.0, high)


def mcnemar(a_correct: Sequence[bool | None], b_correct: Sequence[bool | None], exact: bool | None = None,
            level: float = 0.95) -> Paired:
    """McNemar's test of A vs B accuracy on paired items, with Newcombe's score interval for the
    difference (`newcombe_paired`; the Wald interval reached past ±100 on a few items).

    `exact=None` uses the exact binomial test when the discordant pairs are fewer than 25.
    """
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    a, b = _bools(a_correct), _bools(b_correct)
    if len(a) != len(b):
        raise MovieMemError(f"paired comparison needs the same items: {len(a)} vs {len(b)}")
    n = len(a)
    if n == 0:
        return Paired(0, NAN, NAN, NAN, NAN, "mcnemar", interval="newcombe")
    n11 = int(((a == 1) & (b == 1)).sum())
    n10 = int(((a == 1) & (b == 0)).sum())
    n01 = int(((a == 0) & (b == 1)).sum())
    n00 = n - n11 - n10 - n01
    discordant = n10 + n01
    use_exact = discordant < 25 if exact is None else exact
    if discordant == 0:
        p_value, stat = 1.0, 0.0
    else:
        res = sm_mcnemar([[n11, n10], [n01, n00]], exact=use_exact, correction=True)
        p_value, stat = float(res.pvalue), float(res.statistic)
    low, high = newcombe_paired(n11, n10, n01, n00, level)
    return Paired(n, (n10 - n01) / n, low, high, p_value, "mcnemar-exact" if use_exact else "mcnemar-chi2", stat,
                  n10, n01, "newcombe")


def paired_wald(n10: int, n01: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wald interval of a paired difference, (n10 - n01)/n ± z·sqrt(n10 + n01 - (n10 - n01)^2/n)/n,
    unclipped: what CHNB-style tables print, kept to show beside Newcombe's (it can leave [-1, 1])."""
    if n <= 0:
        return NAN, NAN
    d = (n10 - n01) / n
    se = math.sqrt(max(0.0, n10 + n01 - (n10 - n01) ** 2 / n)) / n
    z = _z(level)
    return d - z * se, d + z * se


def paired_bootstrap(a_scores: Sequence[float], b_scores: Sequence[float], n_resamples: int = 10000,
                     seed: int = 0, level: float = 0.95) -> Paired:
    """Mean of A - B over paired items: percentile bootstrap interval and a two-sided p-value
    (twice the share of resampled means on the far side of zero)."""
    a, b = np.asarray(a_scores, dtype=float), np.asarray(b_scores, dtype=float)
    if a.shape != b.shape:
        raise MovieMemError(f"paired comparison needs the same items: {len(a)} vs {len(b)}")
    d = a - b
    if len(d) == 0:
        return Paired(0, NAN, NAN, NAN, NAN, "paired-bootstrap", interval="bootstrap-percentile")
    mean = float(d.mean())
    if len(d) < 2 or np.all(d == d[0]):
        return Paired(len(d), mean, mean, mean, 1.0 if mean == 0 else 0.0, "paired-bootstrap",
                      interval="bootstrap-percentile")
    res = stats.bootstrap((d,), np.mean, n_resamples=n_resamples, confidence_level=level, method="percentile",
                          rng=np.random.default_rng(seed))
    dist = res.bootstrap_distribution
    p = 2 * min(float((dist <= 0).mean()), float((dist >= 0).mean()))
    return Paired(len(d), mean, float(res.confidence_interval.low), float(res.confidence_interval.high),
                  min(1.0, p), "paired-bootstrap", interval="bootstrap-percentile")


# ----------------------------------------------------------------------------- MF² claims


@dataclass(frozen=True)
class ClaimScores:
    pairs: int
    pairwise: Estimate  # both claims of a pair judged right
    tpr: Estimate  # true claims judged TRUE
    tnr: Estimate  # false claims judged FALSE
    unparseable: Estimate  # share of single-claim replies that could not be read

    def to_dict(self) -> ClaimScoresLine:
        return {"pairs": self.pairs, "pairwise": self.pairwise.to_dict(), "tpr": self.tpr.to_dict(),
                "tnr": self.tnr.to_dict(), "unparseable": self.unparseable.to_dict()}


def claim_pairs(on_true: Sequence[bool | None], on_false: Sequence[bool | None], level: float = 0.95) -> ClaimScores:
    """MF² scores from the verdicts (True = judged TRUE, None = unparseable) on each pair's true
    and false claim. Unparseable verdicts count as wrong in every rate."""
    if len(on_true) != len(on_false):
        raise MovieMemError(f"{len(on_true)} true-claim verdicts but {len(on_false)} false-claim verdicts")
    n = len(on_true)
    tp = sum(v is True for v in on_true)
    tn = sum(v is False for v in on_false)
    both = sum(t is True and f is False for t, f in zip(on_true, on_false))
    bad = sum(v is None for v in on_true) + sum(v is None for v in on_false)
    return ClaimScores(n, wilson(both, n, level), wilson(tp, n, level), wilson(tn, n, level), wilson(bad, 2 * n, level))


# ----------------------------------------------------------------------------- NEST relations


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float
    support: int  # gold items of this type
    predicted: int  # items predicted as this type

    def to_dict(self) -> PRFLine:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1, "support": self.support,
                "predicted": self.predicted}


def _prf(tp: int, pred: int, gold: int) -> PRF:
    p = tp / pred if pred else 0.0
    r = tp / gold if gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return PRF(p, r, f, gold, pred)


def relation_scores(gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str] | None = None,
                    flashback: Sequence[bool] | None = None) -> RelationScores:
    """Per-type precision / recall / F1, micro and macro overall, and the flashback subset.

    A None prediction (invalid answer) is a miss for its gold type and a prediction of no type.
    Macro averages over the types present in gold. The flashback subset is the items flagged in
    `flashback` (default: gold label 'flashback'): accuracy on them plus flashback-type P/R/F1.
    """
    if len(gold) != len(pred):
        raise MovieMemError(f"{len(gold)} gold labels but {len(pred)} predictions")
    types = list(labels) if labels is not None else sorted(set(gold) | {p for p in pred if p})
    per = {}
    for t in types:
        tp = sum(g == t and p == t for g, p in zip(gold, pred))
        per[t] = _prf(tp, sum(p == t for p in pred), sum(g == t for g in gold))
    tp_all = sum(g == p for g, p in zip(gold, pred))
    micro = _prf(tp_all, sum(p is not None for p in pred), len(gold))
    present = [per[t] for t in types if per[t].support]
    p_mac, r_mac, f_mac = (float(np.mean([getattr(x, k) for x in present])) if present else 0.0
                           for k in ("precision", "recall", "f1"))
    macro = PRF(p_mac, r_mac, f_mac, len(gold), sum(p is not None for p in pred))
    fb = list(flashback) if flashback is not None else [g == "flashback" for g in gold]
    idx = [i for i, f in enumerate(fb) if f]
    fb_correct = [pred[i] == gold[i] for i in idx]
    return {"per_type": {t: v.to_dict() for t, v in per.items()}, "micro": micro.to_dict(), "macro": macro.to_dict(),
            "flashback": {"n": len(idx), "accuracy": accuracy(fb_correct).to_dict(),
                          "prf": per["flashback"].to_dict() if "flashback" in per else None}}


# ----------------------------------------------------------------------------- localization, judge


def localization_accuracy(pred_times: Sequence[float | None], spans: Sequence[tuple[float, float]],
                          level: float = 0.95) -> Estimate:
    """Scene-level accuracy: a predicted time is right when it falls inside the gold scene [start, end]."""
    if len(pred_times) != len(spans):
        raise MovieMemError(f"{len(pred_times)} predictions but {len(spans)} scenes")
    return accuracy([t is not None and s <= t <= e for t, (s, e) in zip(pred_times, spans)], level)


def mean_ci(scores: Sequence[float | None], level: float = 0.95) -> Estimate:
    """Mean of judge scores with a Student-t interval; None (failed judge call) is left out of the
    mean, and `n` counts only scored items (the caller reports the failures)."""
    x = np.array([s for s in scores if s is not None], dtype=float)
    if len(x) == 0:
        return _empty()
    m = float(x.mean())
    if len(x) == 1:
        return Estimate(1, m, NAN, NAN, NAN)
    se = float(x.std(ddof=1) / math.sqrt(len(x)))
    h = float(stats.t.ppf(0.5 + level / 2, len(x) - 1)) * se
    return Estimate(len(x), m, m - h, m + h, se)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman rank correlation and its p-value (scipy); NaN when undefined."""
    if len(x) != len(y):
        raise MovieMemError(f"{len(x)} vs {len(y)} values")
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return NAN, NAN
    res = stats.spearmanr(x, y)
    return float(res.statistic), float(res.pvalue)
