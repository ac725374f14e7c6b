"""Metrics against hand-computed values and against scipy / statsmodels called directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from moviemem.eval import metrics
from moviemem.foundation.errors import MovieMemError

Z = 1.959963984540054


def test_wald_interval_by_hand():
    e = metrics.wald(7, 10)
    se = math.sqrt(0.7 * 0.3 / 10)  # 0.1449138
    assert e.value == pytest.approx(0.7)
    assert e.se == pytest.approx(se)
    assert e.ci_low == pytest.approx(0.7 - Z * se) == pytest.approx(0.415974, abs=1e-6)
    assert e.ci_high == pytest.approx(0.984026, abs=1e-6)
    assert e.k == 7 and e.n == 10


def test_wald_clips_and_handles_empty():
    e = metrics.wald(10, 10)
    assert (e.ci_low, e.ci_high) == (1.0, 1.0)
    e = metrics.wald(1, 2)
    assert e.ci_low == 0.0 and e.ci_high == 1.0  # 0.5 ± 0.693, clipped
    assert math.isnan(metrics.wald(0, 0).value)
    with pytest.raises(MovieMemError):
        metrics.wald(3, 2)


def test_accuracy_counts_invalid_as_wrong():
    e = metrics.accuracy([True, False, None, True])
    assert e.n == 4 and e.k == 2 and e.value == 0.5


def test_clustered_se_by_hand_and_statsmodels():
    import statsmodels.api as sm

    y = [1, 0, 1, 1, 0, 0]
    films = ["a", "a", "b", "b", "c", "c"]
    # residuals from the mean 0.5 summed per film: a 0, b +1, c -1; CR1 = G/(G-1) * sum(s_g^2) / n^2
    by_hand = math.sqrt(3 / 2 * (0 + 1 + 1) / 36)
    assert metrics.clustered_se(y, films) == pytest.approx(by_hand)  # 0.288675
    codes = [0, 0, 1, 1, 2, 2]
    fit = sm.OLS(np.array(y, float), np.ones((6, 1))).fit(cov_type="cluster", cov_kwds={"groups": np.array(codes)})
    assert metrics.clustered_se(y, films) == pytest.approx(float(fit.bse[0]))
    e = metrics.clustered_accuracy(y, films, min_films=3)
    assert e.value == 0.5 and e.se == pytest.approx(by_hand) and (e.ci_low, e.ci_high) == (0.0, 1.0)  # clipped
    e = metrics.clustered_accuracy([1] * 8 + [0] * 2 + [1] * 5 + [0] * 5, ["a"] * 10 + ["b"] * 10, min_films=2)
    assert e.ci_low == pytest.approx(0.65 - Z * e.se) and e.se == pytest.approx(math.sqrt(2 * (1.5**2 * 2) / 400))
    # by default (issue 61) three films are too few for an interval: none is given, and the reason says why
    e = metrics.clustered_accuracy(y, films)
    assert e.value == 0.5 and math.isnan(e.ci_low) and e.reason == "too few films (3)"
    assert math.isnan(metrics.clustered_se([1, 0, 1], ["a", "a", "a"]))  # one film: undefined


def test_clustered_se_wider_than_iid_when_films_differ():
    y = [1] * 10 + [0] * 10
    films = ["a"] * 10 + ["b"] * 10
    assert metrics.clustered_se(y, films) > metrics.accuracy(y).se


def test_per_category_and_invalid_rate():
    pc = metrics.per_category([True, False, True, None], ["plot", "plot", "setting", None])
    assert pc["plot"].value == 0.5 and pc["setting"].value == 1.0 and pc["uncategorised"].value == 0.0
    assert metrics.invalid_rate([True, False, False, False]).value == 0.25


def _pairs(n10: int, n01: int, n11: int = 5, n00: int = 5):
    a = [True] * n10 + [False] * n01 + [True] * n11 + [False] * n00
    b = [False] * n10 + [True] * n01 + [True] * n11 + [False] * n00
    return a, b


def test_mcnemar_exact_by_hand():
    a, b = _pairs(8, 2)
    p = metrics.mcnemar(a, b)
    assert (p.n10, p.n01, p.n) == (8, 2, 20)
    assert p.test == "mcnemar-exact"
    assert p.p_value == pytest.approx(2 * (1 + 10 + 45) / 1024)  # two-sided binomial, 0.109375
    assert p.diff == pytest.approx(6 / 20)
    se = math.sqrt(10 - 36 / 20) / 20
    assert metrics.paired_wald(8, 2, 20)[0] == pytest.approx(0.3 - Z * se)  # the CHNB-style Wald form, kept
    assert (p.ci_low, p.ci_high) == metrics.newcombe_paired(5, 8, 2, 5) and p.interval == "newcombe"


def test_mcnemar_asymptotic_matches_chi2():
    a, b = _pairs(8, 2)
    p = metrics.mcnemar(a, b, exact=False)
    assert p.statistic == pytest.approx((abs(8 - 2) - 1) ** 2 / 10)  # 2.5
    assert p.p_value == pytest.approx(stats.chi2.sf(2.5, 1))
    a, b = _pairs(30, 10)
    assert metrics.mcnemar(a, b).test == "mcnemar-chi2"  # 40 discordant pairs


def test_mcnemar_no_discordant_pairs_and_length_check():
    p = metrics.mcnemar([True, False], [True, False])
    assert p.p_value == 1.0 and p.diff == 0.0
    with pytest.raises(MovieMemError):
        metrics.mcnemar([True], [True, False])


def test_paired_bootstrap_against_scipy():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 6, 40).astype(float)
    b = a - rng.integers(0, 2, 40)
    p = metrics.paired_bootstrap(a, b, n_resamples=2000, seed=5)
    d = a - b
    ref = stats.bootstrap((d,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(5))
    assert p.diff == pytest.approx(d.mean())
    assert p.ci_low == pytest.approx(ref.confidence_interval.low)
    assert p.ci_high == pytest.approx(ref.confidence_interval.high)
    assert p.ci_low > 0 and p.p_value < 0.01
    same = metrics.paired_bootstrap([1, 2, 3], [1, 2, 3])
    assert same.diff == 0 and same.p_value == 1.0


def test_claim_pairs_by_hand():
    on_true = [True, True, False, None, True]
    on_false = [False, True, False, False, None]
    cs = metrics.claim_pairs(on_true, on_false)
    assert cs.pairs == 5
    assert cs.pairwise.k == 1  # only the first pair is judged right on both claims
    assert cs.tpr.value == pytest.approx(3 / 5)
    assert cs.tnr.value == pytest.approx(3 / 5)
    assert cs.unparseable.value == pytest.approx(2 / 10)


def test_relation_scores_by_hand():
    gold = ["before", "before", "causal", "flashback", "flashback"]
    pred = ["before", "causal", "causal", "flashback", None]
    s = metrics.relation_scores(gold, pred)
    assert s["per_type"]["before"] == {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2, "predicted": 1}
    assert s["per_type"]["causal"]["precision"] == 0.5 and s["per_type"]["causal"]["recall"] == 1.0
    assert s["per_type"]["flashback"]["recall"] == 0.5 and s["per_type"]["flashback"]["precision"] == 1.0
    # micro: 3 right of 4 predictions and of 5 gold items
    assert s["micro"]["precision"] == pytest.approx(3 / 4) and s["micro"]["recall"] == pytest.approx(3 / 5)
    assert s["macro"]["f1"] == pytest.approx((2 / 3 + 2 / 3 + 2 / 3) / 3)
    assert s["flashback"]["n"] == 2 and s["flashback"]["accuracy"]["value"] == 0.5


def test_localization_accuracy():
    e = metrics.localization_accuracy([5.0, 12.0, None, 20.0], [(0, 10), (0, 10), (0, 10), (20, 30)])
    assert e.k == 2 and e.n == 4


def test_mean_ci_against_scipy_t():
    scores = [3, 4, 5, 2, 4, None]
    e = metrics.mean_ci(scores)
    x = np.array([3, 4, 5, 2, 4], float)
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert e.n == 5 and e.value == pytest.approx(3.6)
    assert (e.ci_low, e.ci_high) == (pytest.approx(lo), pytest.approx(hi))


def test_spearman_matches_scipy():
    x, y = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5]
    rho, p = metrics.spearman(x, y)
    ref = stats.spearmanr(x, y)
    assert rho == pytest.approx(ref.statistic) == pytest.approx(0.8)
    assert p == pytest.approx(ref.pvalue)
    assert math.isnan(metrics.spearman([1, 1, 1], [1, 2, 3])[0])
