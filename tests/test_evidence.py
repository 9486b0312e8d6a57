"""The rules of evidence (socialgym.experiments.studies.evidence) on synthetic inputs whose answer is known."""

import math

import numpy as np
import pytest

from socialgym.experiments.studies import evidence as ev


def test_an_under_scaled_run_is_not_tested_whatever_its_effect():
    design = ev.Design(agents=30, rounds=15, runs=3, llm_behaviour=True)
    huge = ev.paired_difference([5.0, 5.1, 5.2, 4.9, 5.0, 5.3], [0.0] * 6)
    assert ev.direction(huge, +1) == ev.SUPPORTED
    small = ev.Scale(agents=5, rounds=4, runs=2, model="the embedded SmolLM2-135M")
    verdict, short = ev.gated(ev.direction(huge, +1), design, small)
    assert verdict == ev.NOT_TESTED
    assert short == ["5 agents < the paper's 30", "4 rounds < 15", "2 independent runs < 5",
                     "the embedded SmolLM2-135M is not a model named capable enough (evidence.CAPABLE_MODELS)"]
    # at scale, with a capable model, the direction decides
    at_scale = ev.Scale(agents=30, rounds=15, runs=6, model="gpt-4.1-mini")
    assert ev.gated(ev.SUPPORTED, design, at_scale) == (ev.SUPPORTED, [])


def test_scripted_users_never_test_a_claim_about_llm_behaviour_but_may_test_mechanics():
    scripted = ev.Scale(agents=50, rounds=50, runs=10)
    assert scripted.population == "scripted users"
    behaviour = ev.Design(agents=50, rounds=50, llm_behaviour=True)
    assert ev.gated(ev.SUPPORTED, behaviour, scripted)[0] == ev.NOT_TESTED
    mechanics = ev.Design(agents=50, rounds=50)
    assert ev.gated(ev.SUPPORTED, mechanics, scripted) == (ev.SUPPORTED, [])
    # fewer runs than MIN_RUNS is under scale even when the paper reports none
    assert ev.gated(ev.SUPPORTED, mechanics, ev.Scale(50, 50, 4))[0] == ev.NOT_TESTED


def test_bootstrap_interval_of_a_known_sample():
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    iv = ev.bootstrap_mean(values)
    assert iv.mean == 4.5 and iv.n == 8
    # the bootstrap standard error of a mean is close to sd(ddof=0) / sqrt(n) = 2.291 / 2.828 = 0.810
    assert 4.5 - 1.96 * 0.81 - 0.25 < iv.lo < 4.5 - 1.96 * 0.81 + 0.25
    assert 4.5 + 1.96 * 0.81 - 0.25 < iv.hi < 4.5 + 1.96 * 0.81 + 0.25
    assert ev.bootstrap_mean(values) == iv                      # seeded: the page is regenerable
    with pytest.raises(ValueError, match="not finite"):
        ev.bootstrap_mean([1.0, float("nan")])
    with pytest.raises(ValueError, match="one value per independent run"):
        ev.bootstrap_mean([[1.0, 2.0]])


def test_autocorrelated_noise_without_trend_is_not_called_a_rise():
    """AR(1) noise (phi 0.9) with no trend: pooling a run's rounds as independent points finds a
    'significant' slope far more often than 5 %; slopes per run, then across runs, do not."""
    from scipy import stats

    rng = np.random.default_rng(7)
    per_run_hits = pooled_hits = 0
    trials = 200
    for _ in range(trials):
        e = rng.normal(size=(6, 30))
        y = np.zeros_like(e)
        y[:, 0] = e[:, 0] / math.sqrt(1 - 0.81)
        for t in range(1, 30):
            y[:, t] = 0.9 * y[:, t - 1] + e[:, t]
        per_run_hits += ev.direction(ev.trend(y), +1) == ev.SUPPORTED
        fit = stats.linregress(np.tile(np.arange(30.0), 6), y.ravel())
        pooled_hits += fit.slope - 1.96 * fit.stderr > 0
    assert pooled_hits / trials > 0.12          # the old rule: many false rises (nominal 2.5 %)
    assert per_run_hits / trials <= 0.08        # the rule of evidence: about the nominal 2.5 %


def test_a_real_trend_is_found_per_run():
    rng = np.random.default_rng(1)
    y = 0.1 * np.arange(1, 16)[None, :] + rng.normal(0, 0.2, size=(6, 15))
    iv = ev.trend(y)
    assert ev.direction(iv, +1) == ev.SUPPORTED and ev.direction(iv, -1) == ev.CONTRADICTED
    assert iv.lo < 0.1 < iv.hi and iv.n == 6
    assert ev.slopes_per_run([[1.0, 3.0, 5.0]]).tolist() == [2.0]
    assert ev.slopes_per_run([[0.0, 1.0, 4.0]], x=[1, 3, 5]).tolist() == [1.0]


def test_pairs_are_the_unit():
    """Four run pairs with five group cells each: the interval counts 4 pairs, not 20 cells. With
    a pair-level random effect and no true effect, treating cells as independent calls an effect
    far more often than the pairs do."""
    pairs = np.repeat(np.arange(4), 5)
    diffs = np.array([0.3] * 5 + [-0.1] * 5 + [0.2] * 5 + [0.0] * 5)
    means, order = ev.unit_means(diffs, pairs)
    assert order == [0, 1, 2, 3] and np.allclose(means, [0.3, -0.1, 0.2, 0.0])
    assert ev.bootstrap_mean(means).n == 4
    rng = np.random.default_rng(3)
    cell_hits = unit_hits = 0
    for _ in range(200):
        d = np.repeat(rng.normal(0, 1, 8), 5) + rng.normal(0, 0.1, 40)
        cell_hits += ev.direction(ev.bootstrap_mean(d), +1) != ev.INCONCLUSIVE
        unit_hits += ev.direction(ev.bootstrap_mean(ev.unit_means(d, np.repeat(np.arange(8), 5))[0]), +1) \
            != ev.INCONCLUSIVE
    assert cell_hits / 200 > 0.3
    assert unit_hits / 200 <= 0.15


def test_relative_change_resamples_pairs_together():
    iv = ev.relative_change([1.5, 1.5, 1.5, 1.5, 1.5], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert iv.mean == pytest.approx(0.5) and iv.lo == pytest.approx(0.5) and iv.hi == pytest.approx(0.5)
    with pytest.raises(ValueError, match="differ in length"):
        ev.relative_change([1.0, 2.0], [1.0])


def test_ranks_carry_bootstrap_confidence():
    clear = {"INF": [0.9, 0.8, 0.85, 0.95, 0.9], "EMO": [0.5, 0.6, 0.55, 0.5, 0.6],
             "COORD": [0.1, 0.2, 0.15, 0.1, 0.2]}
    p, full = ev.rank_probability(clear, lambda r: r[0] == "INF" and r[-1] == "COORD")
    assert full == ["INF", "EMO", "COORD"] and p == 1.0
    assert ev.ranking_verdict(p, 0.0) == ev.SUPPORTED
    # equal means up to noise: a ranking of the full sample exists, but no confidence in it
    rng = np.random.default_rng(0)
    noisy = {k: rng.normal(0.5, 0.2, 6) for k in ("INF", "EMO", "COORD")}
    p, _ = ev.rank_probability(noisy, lambda r: r[0] == "INF" and r[-1] == "COORD")
    q, _ = ev.rank_probability(noisy, lambda r: r[0] != "INF" or r[-1] != "COORD")
    assert p + q == pytest.approx(1.0)
    assert ev.ranking_verdict(p, 0.0) == ev.INCONCLUSIVE


def test_direction_and_size_are_judged_apart():
    iv = ev.Interval(0.96, 0.9, 1.0, 5)
    assert ev.direction(iv, +1) == ev.SUPPORTED
    assert ev.size_against(iv, 0.085) == "ours above the paper's +0.085"
    assert ev.size_against(ev.Interval(0.1, 0.05, 0.2, 5), 0.085) == "paper's +0.085 inside our interval"
    assert ev.size_against(ev.Interval(0.01, 0.0, 0.02, 5), 0.085) == "ours below the paper's +0.085"
    assert ev.size_against(iv, None) == "the paper gives no number"


def test_the_real_network_band_is_the_spread_between_networks():
    # Chang et al.'s clustering: mean 0.454, SE 0.043 over 8 networks -> SD 0.043 * sqrt(8) = 0.1216
    lo, hi = ev.network_band(0.454, 0.043 * math.sqrt(8))
    assert lo == pytest.approx(0.454 - 1.96 * 0.12162, abs=1e-4) and hi == pytest.approx(0.454 + 0.23838, abs=1e-4)
    assert ev.band_distance(0.3, (lo, hi)) == 0.0
    assert ev.band_distance(0.8, (lo, hi)) == pytest.approx(0.8 - 0.69238, abs=1e-4)


def test_bootstrap_slope_over_units():
    iv = ev.bootstrap_slope([1.0, 2.0, 3.0, 4.0, 5.0], [2.0, 4.0, 6.0, 8.0, 10.0])
    assert (iv.mean, iv.lo, iv.hi, iv.n) == (pytest.approx(2.0), pytest.approx(2.0), pytest.approx(2.0), 5)
    assert math.isnan(ev.bootstrap_slope([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).mean)
