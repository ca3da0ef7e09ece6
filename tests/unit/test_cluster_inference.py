"""Cluster-aware inference (ragscale.stats.clustered): one task per cluster is the task-level
statistics exactly; CR1 by hand and against statsmodels; the cluster BCa interval against scipy's
paired bootstrap on cluster totals; the exact sign-flip p-value against brute force; order
independence; and a simulation of conversations (intra-conversation correlation 0.5) in which the
task-level intervals under-cover and the conversation-aware ones do not. Benjamini-Hochberg in
ragscale.stats.paired.adjust, and the other corrections unchanged."""

import itertools

import numpy as np
import pytest
from scipy import stats

from ragscale.stats import clustered as cl
from ragscale.stats import paired as st
from ragscale.stats.intervals import mean_ci, rng_arg


def conversations(rng, sizes):
    """Cluster codes of tasks in conversations of the given sizes, shuffled and non-contiguous
    (codes 3, 10, 17, ...)."""
    codes = np.repeat(3 + 7 * np.arange(len(sizes)), sizes)
    return codes[rng.permutation(len(codes))]


# ---------------------------------------------------------------- one task per cluster

@pytest.mark.parametrize("n,confidence", [(2, 0.95), (7, 0.9), (150, 0.95)])
def test_singleton_clusters_cr1_is_the_t_interval(n, confidence):
    rng = np.random.default_rng(n)
    y = rng.normal(0.3, 1.0, n)
    est = cl.cluster_mean(y, rng.permutation(n) * 5, confidence=confidence)
    want = mean_ci(n, y.mean(), y.std(ddof=1), confidence)
    assert est["n"] == n and est["clusters"] == n
    assert est["ci"] == pytest.approx(list(want), abs=1e-12, rel=0)
    assert est["design_effect"] == pytest.approx(1.0, abs=1e-12)


def test_singleton_clusters_are_paired_tests_exactly():
    """Every comparison whose clusters hold one task each: paired_tests' floats, whether tested alone
    or beside clustered comparisons (the singleton ones are batched as paired_tests batches them)."""
    rng = np.random.default_rng(5)
    singles = [rng.normal(0.1, 0.5, n) for n in (12, 40, 40, 40, 40, 40, 300)]  # 40: the matrix-product path
    clustered = [rng.normal(0.1, 0.5, 30), rng.normal(0.0, 0.5, 60)]
    diffs = singles[:3] + clustered[:1] + singles[3:] + clustered[1:]
    codes = [rng.permutation(len(d)) for d in singles]
    clus = codes[:3] + [np.repeat(np.arange(10), 3)] + codes[3:] + [np.repeat(np.arange(15), 4)]
    got = cl.cluster_paired_tests(diffs, clus, resamples=2000, confidence=0.95, seed=9)
    want = st.paired_tests(singles, resamples=2000, confidence=0.95, seed=9)
    assert [got[i] for i in (0, 1, 2, 4, 5, 6, 7)] == want  # identical floats
    alone = cl.cluster_paired_tests(singles[:1], codes[:1], resamples=2000, confidence=0.95, seed=9)
    assert alone == st.paired_tests(singles[:1], resamples=2000, confidence=0.95, seed=9)


# ---------------------------------------------------------------- CR1

def test_cr1_by_hand():
    """Clusters {a: 1, 2, 3}, {b: 5}, {c: 0, 4}: N = 6, mean = 15/6 = 2.5, S - mean * N_g =
    (6 - 7.5, 5 - 2.5, 4 - 5) = (-1.5, 2.5, -1); V = 3/2 * (2.25 + 6.25 + 1) / 36 = 0.395833..."""
    y = np.array([1.0, 5.0, 0.0, 2.0, 4.0, 3.0])
    c = np.array([8, 2, 40, 8, 40, 8])  # any codes, any order
    est = cl.cluster_mean(y, c)
    v = 1.5 * 9.5 / 36
    half = stats.t.ppf(0.975, 2) * np.sqrt(v)
    assert est["mean"] == 2.5 and est["n"] == 6 and est["clusters"] == 3
    assert est["ci"] == pytest.approx([2.5 - half, 2.5 + half], rel=1e-12)
    s2 = np.var(y, ddof=1)  # 3.5
    assert est["design_effect"] == pytest.approx(v / (s2 / 6), rel=1e-12)
    assert cl.design_effect(y, c) == est["design_effect"]


def test_cr1_edge_cases():
    assert cl.cluster_mean(np.array([1.0]), np.array([0])) is None
    one = cl.cluster_mean(np.array([1.0, 2.0, 4.0]), np.array([7, 7, 7]))
    assert one["ci"] is None and one["clusters"] == 1 and one["design_effect"] is None
    flat = cl.cluster_mean(np.full(6, 0.5), np.array([0, 0, 1, 1, 2, 2]))
    assert flat["ci"] == [0.5, 0.5] and flat["design_effect"] is None
    assert cl.design_effect(np.full(6, 0.5), np.array([0, 0, 1, 1, 2, 2])) is None
    with pytest.raises(ValueError):
        cl.cluster_mean(np.ones(4), np.zeros(3, dtype=int))


def test_cr1_against_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 9, 25)
    c = conversations(rng, sizes)
    y = rng.normal(0, 1, len(c)) + rng.normal(0, 1, 200)[c // 7]
    fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": c}, use_t=True)
    est = cl.cluster_mean(y, c)
    naive = sm.OLS(y, np.ones(len(y))).fit()
    assert est["mean"] == pytest.approx(fit.params[0], rel=1e-12)
    assert est["ci"] == pytest.approx(list(fit.conf_int(0.05)[0]), rel=1e-10)
    assert est["design_effect"] == pytest.approx(fit.bse[0] ** 2 / naive.bse[0] ** 2, rel=1e-10)


def test_cluster_codes():
    codes = cl.cluster_codes(["b", None, "a", "b", 3, None, "a"])
    # sorted string order: "3" < "a" < "b"; the Nones after them, each its own
    assert codes.tolist() == [2, 3, 1, 2, 0, 4, 1]
    assert codes.dtype.kind == "i"
    assert cl.cluster_codes([]).tolist() == []


# ---------------------------------------------------------------- the cluster bootstrap and sign flips

def test_cluster_bca_equals_scipys_paired_bootstrap_of_cluster_totals():
    """The interval is scipy.stats.bootstrap's BCa interval of sum(D) / sum(n), the pairs (D_g, n_g)
    resampled together, drawn from the generator cluster_paired_tests uses for G clusters."""
    rng = np.random.default_rng(4)
    g = 40
    sizes = rng.integers(1, 9, g)
    c = np.repeat(np.arange(g), sizes)
    d = rng.normal(0.1, 0.4, len(c)) + rng.normal(0, 0.3, g)[c]
    lo, hi, _ = cl.cluster_paired_tests([d], [c], resamples=3000, confidence=0.9, seed=11)[0]
    sums, counts = np.bincount(c, weights=d), np.bincount(c).astype(float)
    ref = stats.bootstrap((sums, counts), lambda s, n, axis=-1: s.sum(axis) / n.sum(axis), paired=True,
                          vectorized=True, n_resamples=3000, confidence_level=0.9, method="BCa",
                          **{next(iter(rng_arg(0))): st.resample_rng(11, g, 0)}).confidence_interval
    assert (lo, hi) == pytest.approx((ref.low, ref.high), rel=1e-9)


def test_flat_and_single_cluster_comparisons():
    c = np.array([0, 0, 1, 1, 1, 2])
    (lo, hi, p), = cl.cluster_paired_tests([np.full(6, 0.1)], [c], resamples=500, confidence=0.95, seed=0)
    assert lo == hi == pytest.approx(0.1) and p == 2 / 8  # G = 3: only "no flip" reaches the observed mean
    (lo, hi, p), = cl.cluster_paired_tests([np.zeros(6)], [c], resamples=500, confidence=0.95, seed=0)
    assert (lo, hi, p) == (0.0, 0.0, 1.0)
    (lo, hi, p), = cl.cluster_paired_tests([np.array([1.0, 2.0, 4.0])], [np.zeros(3, dtype=int)],
                                           resamples=500, confidence=0.95, seed=0)
    assert lo == hi == pytest.approx(7 / 3) and p == 1.0
    with pytest.raises(ValueError):
        cl.cluster_paired_tests([np.zeros(3)], [np.zeros(2, dtype=int)], resamples=10, confidence=0.95, seed=0)


@pytest.mark.parametrize("g", [2, 5, 9])
def test_exact_signflip_equals_brute_force(g):
    """2**G <= resamples: every sign pattern of the clusters' sums, once; equal to enumerating them
    with itertools, and to scipy.stats.permutation_test on the cluster sums."""
    rng = np.random.default_rng(g)
    sizes = rng.integers(1, 6, g)
    c = conversations(rng, sizes)
    d = np.round(rng.normal(0.2, 0.5, len(c)), 2)
    p = cl.cluster_paired_tests([d], [c], resamples=1000, confidence=0.95, seed=1)[0][2]
    sums = np.array([d[c == k].sum() for k in np.unique(c)])
    n = len(d)
    observed = sums.sum() / n
    null = np.array([np.dot(eps, sums) / n for eps in itertools.product((1.0, -1.0), repeat=g)])
    tol = abs(observed) * np.finfo(float).eps * 100
    less, greater = (null <= observed + tol).sum(), (null >= observed - tol).sum()
    assert p == pytest.approx(min(1.0, 2 * min(less, greater) / 2 ** g), abs=1e-15)
    ref = stats.permutation_test((sums,), lambda x, axis=-1: x.sum(axis) / n, permutation_type="samples",
                                 n_resamples=1000, vectorized=True).pvalue
    assert p == pytest.approx(ref, abs=1e-12)


def test_random_signflip_close_to_exact():
    """15 clusters, 2**15 > 4000: random flips, within Monte Carlo error of the exact p-value."""
    rng = np.random.default_rng(8)
    c = np.repeat(np.arange(15), 3)
    d = rng.normal(0.15, 0.5, 45)
    p_random = cl.cluster_paired_tests([d], [c], resamples=4000, confidence=0.95, seed=2)[0][2]
    p_exact = cl.cluster_paired_tests([d], [c], resamples=2 ** 15, confidence=0.95, seed=2)[0][2]
    assert abs(p_random - p_exact) < 0.03 and 0 < p_exact < 1


def test_same_seed_same_results_whatever_the_order():
    rng = np.random.default_rng(6)
    diffs, clus = [], []
    for k in range(12):
        g = (20, 20, 20, 20, 20, 33, 8, 33, 50, 20, 50, 8)[k]
        sizes = rng.integers(1, 7, g) if k != 11 else np.ones(g, dtype=int)  # the last one: singletons
        clus.append(conversations(rng, sizes))
        diffs.append(rng.normal(0.05 * k, 0.5, len(clus[-1])))
    clus.append(rng.permutation(8))
    diffs.append(rng.normal(0, 1, 8))
    first = cl.cluster_paired_tests(diffs, clus, resamples=2000, confidence=0.95, seed=3)
    order = rng.permutation(len(diffs))
    again = cl.cluster_paired_tests([diffs[i] for i in order], [clus[i] for i in order], resamples=2000,
                                    confidence=0.95, seed=3)
    assert [first[i] for i in order] == again
    for i in (0, 5, 8):  # and alone
        assert cl.cluster_paired_tests([diffs[i]], [clus[i]], resamples=2000, confidence=0.95, seed=3)[0] == first[i]
    other = cl.cluster_paired_tests(diffs, clus, resamples=2000, confidence=0.95, seed=4)
    assert other != first


# ---------------------------------------------------------------- the simulation

REPS = 2000


def simulate(delta: float, seed: int, reps: int = REPS, g: int = 100):
    """``reps`` data sets of per-task differences delta + u_conversation + e_task, var(u) = var(e) =
    0.5 (intra-conversation correlation 0.5), in ``g`` conversations of 4 to 8 turns (sizes drawn
    once per seed, the design held fixed across repetitions)."""
    rng = np.random.default_rng(seed)
    codes = conversations(rng, rng.integers(4, 9, g))
    u = rng.normal(0, np.sqrt(0.5), (reps, codes.max() + 1))
    e = rng.normal(0, np.sqrt(0.5), (reps, len(codes)))
    return delta + u[:, codes] + e, codes


def naive_t(d: np.ndarray, confidence: float = 0.95):
    n = d.shape[1]
    m, se = d.mean(axis=1), d.std(axis=1, ddof=1) / np.sqrt(n)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * se
    return m - half, m + half


def test_simulation_conversation_aware_inference_holds_its_level(record_property):
    """With a true difference of 0.1 the task-level 95% intervals cover it about two times in three;
    the conversation-aware ones about 95% of the time. With no difference the cluster sign-flip test
    rejects about 5% of the time, the task-level one about a third of the time."""
    figures = {}
    for delta, seed in ((0.1, 2024), (0.0, 2025)):
        d, codes = simulate(delta, seed)
        clustered = np.array(cl.cluster_paired_tests(list(d), [codes] * REPS, resamples=999, confidence=0.95,
                                                     seed=seed))
        naive = np.array(st.paired_tests(list(d), resamples=999, confidence=0.95, seed=seed))
        cr1 = np.array([cl.cluster_mean(x, codes)["ci"] for x in d])
        t_lo, t_hi = naive_t(d)

        def cover(lo, hi):
            return float(np.mean((lo <= delta) & (delta <= hi)))

        key = f"delta={delta}"
        figures[key] = {"cluster_bca": cover(clustered[:, 0], clustered[:, 1]), "cr1_t": cover(cr1[:, 0], cr1[:, 1]),
                        "naive_bca": cover(naive[:, 0], naive[:, 1]), "naive_t": cover(t_lo, t_hi),
                        "reject_cluster_signflip": int((clustered[:, 2] < 0.05).sum()),
                        "reject_naive_signflip": int((naive[:, 2] < 0.05).sum()),
                        "design_effect": float(np.mean([cl.design_effect(x, codes) for x in d[:200]]))}
    print(f"\nsimulation ({REPS} repetitions each):", figures)
    record_property("simulation", figures)
    for key, f in figures.items():
        # the task-level intervals under-cover badly (design effect about 3.6)
        assert f["naive_bca"] < 0.80 and f["naive_t"] < 0.80, key
        # conversation-aware: CR1 t interval and cluster BCa (the bootstrap's small under-coverage
        # with 100 clusters, about 0.937 over 10 000 repetitions, allowed for)
        assert f["cr1_t"] >= 0.93 and f["cluster_bca"] >= 0.925, key
    null = figures["delta=0.0"]
    assert null["reject_cluster_signflip"] <= 0.065 * REPS  # level 5%: sd of the rate about 0.005
    assert null["reject_naive_signflip"] >= 0.2 * REPS
    assert figures["delta=0.1"]["reject_cluster_signflip"] > 0.15 * REPS  # and it is not blind


# ---------------------------------------------------------------- Benjamini-Hochberg and the others

def old_adjust(pvalues, correction):
    """adjust() before "bh" was added, verbatim: the other corrections must not change."""
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if correction == "none" or m == 0:
        return p.tolist()
    if correction == "bonferroni":
        return np.minimum(1.0, p * m).tolist()
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out.tolist()


def test_bh_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.04, 0.5 (m = 5): p * m / rank = 0.05, 0.05, 0.05, 0.05, 0.5; step-up min
    p = [0.04, 0.01, 0.5, 0.03, 0.02]
    assert st.adjust(p, "bh") == pytest.approx([0.05, 0.05, 0.5, 0.05, 0.05])
    # 0.01, 0.04, 0.045 (m = 3): 0.03, 0.06, 0.045 -> monotone from the top: 0.03, 0.045, 0.045
    assert st.adjust([0.045, 0.01, 0.04], "bh") == pytest.approx([0.045, 0.03, 0.045])
    assert st.adjust([0.9, 0.8], "bh") == pytest.approx([0.9, 0.9])
    assert st.adjust([0.6, 0.7, 0.9], "bh") == pytest.approx([0.9, 0.9, 0.9])
    assert st.adjust([0.7], "bh") == [0.7] and st.adjust([], "bh") == []
    assert max(st.adjust([0.9, 0.95, 1.0, 0.99], "bh")) <= 1.0
    assert "bh" in st.CORRECTIONS


def test_bh_against_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(1)
    for m in (1, 2, 7, 50):
        p = np.concatenate([rng.uniform(0, 0.05, m // 2), rng.uniform(0, 1, m - m // 2)])
        p[rng.integers(0, m)] = p[0]  # a tie
        want = multitest.multipletests(p, method="fdr_bh")[1]
        assert st.adjust(p.tolist(), "bh") == pytest.approx(want.tolist(), rel=1e-12, abs=1e-15)


def test_other_corrections_unchanged():
    rng = np.random.default_rng(3)
    for m in (0, 1, 4, 30):
        p = rng.uniform(0, 1, m) ** 3
        for correction in ("holm", "bonferroni", "none"):
            assert st.adjust(p.tolist(), correction) == old_adjust(p.tolist(), correction)
    with pytest.raises(ValueError, match="holm, bonferroni, none, bh"):
        st.adjust([0.1], "sidak")


# ---------------------------------------------------------------- a slice against the overall mean

def _slice_of_conversations(rng, g=60, every=6, icc=0.5):
    sizes = rng.integers(3, 7, g)
    c = np.repeat(np.arange(g), sizes)
    y = rng.normal(0, np.sqrt(icc), g)[c] + rng.normal(0, np.sqrt(1 - icc), len(c))
    return y, (c % every) == 0, c


def test_subset_vs_all_variance_is_the_cluster_bootstraps():
    rng = np.random.default_rng(11)
    y, inside, c = _slice_of_conversations(rng, g=120, every=3)
    est = cl.subset_vs_all(y, inside, c)
    assert est["diff"] == pytest.approx(y[inside].mean() - y.mean(), rel=1e-12)
    assert est["n"] == inside.sum() and est["clusters"] == 40
    se = (est["ci"][1] - est["diff"]) / stats.t.ppf(0.975, 39)
    boot = []
    for _ in range(3000):
        pick = rng.integers(0, 120, 120)
        rows = np.concatenate([np.flatnonzero(c == g) for g in pick])
        boot.append(y[rows][inside[rows]].mean() - y[rows].mean())
    assert se == pytest.approx(np.std(boot), rel=0.1)


def test_subset_vs_all_holds_its_level_where_turn_level_tests_do_not():
    """A slice of whole conversations (one in six), intra-conversation correlation 0.5, no slice
    effect: the conversation-aware test rejects about 5%; treating turns as independent, far more."""
    rng = np.random.default_rng(12)
    reps, aware, naive = 1000, 0, 0
    for _ in range(reps):
        y, inside, c = _slice_of_conversations(rng)
        aware += cl.subset_vs_all(y, inside, c)["p"] < 0.05
        naive += cl.subset_vs_all(y, inside, np.arange(len(y)))["p"] < 0.05
    assert 0.025 <= aware / reps <= 0.075 and naive / reps > 0.15


def test_subset_vs_all_edge_cases():
    y, c = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1])
    assert cl.subset_vs_all(y, np.zeros(4, bool), c) is None and cl.subset_vs_all(y, np.ones(4, bool), c) is None
    assert cl.subset_vs_all(y, np.array([1, 1, 0, 0], bool), c) is None  # one conversation on each side
    assert cl.subset_vs_all(np.ones(6), np.array([1, 0, 1, 0, 1, 0], bool), np.arange(6)) is None  # no variation
    low = np.tile([0.0, 1.0, 0.2, 0.9, 0.1, 1.1], 3)
    est = cl.subset_vs_all(low, np.tile([1, 0], 9).astype(bool), np.arange(18))
    assert est["diff"] == pytest.approx(0.1 - 0.55) and est["p"] < 0.05 and est["ci"][1] < 0
    # three inside, three outside: the t on 2 degrees of freedom is wide
    few = cl.subset_vs_all(low[:6], np.tile([1, 0], 3).astype(bool), np.arange(6))
    assert few["diff"] == pytest.approx(est["diff"]) and few["p"] > 0.1 and few["ci"][0] < 0 < few["ci"][1]
