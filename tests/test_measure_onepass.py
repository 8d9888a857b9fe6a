"""The one-pass route of `ncproofs measure` (theory.metrics.ClassStats, docs/measure.md "One pass"):
the shifted-data algorithm against the dense float64 reference (tests/measure_reference.py) on
collapsed and non-collapsed data, the naive one-pass formula failing where it does not, exact merges of
segments, and the same numbers (bit for bit) for any number of worker threads."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from measure_reference import reference_metrics, synthetic  # noqa: E402

from proofs_check import cli  # noqa: E402
from proofs_check import measure as PM  # noqa: E402
from theory import metrics as MT  # noqa: E402

RTOL = 1e-8  # tests/test_measure.py's reproduction tolerance


def _close(got: dict, ref: dict, keys, rtol=RTOL):
    for k in keys:
        r, g = ref[k], got[k]
        assert g is not None, k
        assert abs(g - r) <= rtol * max(abs(r), 1e-300), (k, g, r)


def collapsed(seed=0, N=3000, d=8, K=5, spread=1e-6, norm=1.0):
    """Class means of norm ``norm`` (far from the origin: a common offset of 10 x norm as well), within-class
    spread ``spread`` x norm: nearly collapsed features."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(K, d))
    means *= norm / np.linalg.norm(means, axis=1, keepdims=True)
    offset = 10.0 * norm * rng.normal(size=d) / np.sqrt(d)
    y = rng.integers(0, K, size=N)
    y[:K] = np.arange(K)
    H = offset + means[y] + spread * norm * rng.normal(size=(N, d))
    return H, y


def naive_one_pass(H, y, K):
    """The textbook one-pass formula: N Sigma_W = sum h h^T - sum_c n_c mu_c mu_c^T (no shift), and the
    class variances sum ||h||^2 - n_c ||mu_c||^2, in float64 over chunks."""
    d = H.shape[1]
    S = np.zeros((d, d))
    sums = np.zeros((K, d))
    sq = np.zeros(K)
    for s in range(0, len(y), 500):
        X, yy = H[s:s + 500], y[s:s + 500]
        S += X.T @ X
        np.add.at(sums, yy, X)
        np.add.at(sq, yy, np.einsum("ij,ij->i", X, X))
    n = np.bincount(y, minlength=K)
    mu = sums / n[:, None]
    Sw = S - (mu * n[:, None]).T @ mu
    M = (mu - mu.mean(0)).T
    Sb = M @ M.T / K
    nc1 = float(np.trace(Sw / len(y) @ np.linalg.pinv(Sb, rcond=1e-12))) / K
    tr_w = float(np.sum(sq - n * np.einsum("ij,ij->i", mu, mu))) / len(y)
    return {"nc1": nc1, "nc1_trace": tr_w / float(np.trace(Sb))}


@pytest.mark.parametrize("K,d", [(5, 8), (12, 4)])
def test_collapsed_features_naive_formula_fails_shifted_does_not(K, d):
    H, y = collapsed(N=3000, d=d, K=K, spread=1e-6)
    ref = reference_metrics(H, y)
    naive = naive_one_pass(H, y, K)
    # the naive formula cancels ||h||^2 / sigma^2 ~ 1e14 (u ~ 1e-16): it misses the tolerance by 1000x or more
    for k in ("nc1", "nc1_trace"):
        assert not abs(naive[k] - ref[k]) <= 1e3 * RTOL * abs(ref[k]), (k, naive[k], ref[k])
    got = MT.measure_arrays(H, y, batch_size=256, passes=1).metrics
    _close(got, ref, ["nc1", "nc1_trace", "cdnv_mean", "cdnv_max", "equinorm", "equiangularity",
                      "max_equiangularity", "gram_distance_etf", "gram_distance_of"])
    # and the two-pass route agrees with it
    two = MT.measure_arrays(H, y, batch_size=256, passes=2).metrics
    _close(got, two, ["nc1", "nc1_trace", "cdnv_mean"])


def test_non_collapsed_and_imbalanced_one_pass_matches_reference():
    for seed, (N, d, K) in enumerate([(900, 6, 9), (800, 20, 4), (500, 3, 3)]):
        H, y, W, b = synthetic(seed=seed, N=N, d=d, K=K, imbalance=True)
        ref = reference_metrics(H, y, W, b)
        got = MT.measure_arrays(H, y, W, b, batch_size=61, passes=1).metrics
        _close(got, ref, [k for k in ref if k not in ("gram_distance_predicted",) and ref[k] != 0])
        assert got["nc4"] == ref["nc4"]


def test_float32_features_converted_per_chunk():
    H, y = collapsed(N=2000, d=6, K=4, spread=1e-3)
    H32 = H.astype(np.float32)
    ref = reference_metrics(H32.astype(np.float64), y)
    got = MT.measure_arrays(H32, y, batch_size=300, passes=1).metrics
    _close(got, ref, ["nc1", "nc1_trace", "cdnv_mean", "gram_distance_etf"])


def test_merge_with_different_shifts_is_the_single_pass():
    H, y = collapsed(N=1200, d=5, K=4, spread=1e-5, seed=3)
    one = MT.ClassStats(4, 5)
    for s in range(0, 1200, 100):
        one.update(H[s:s + 100], y[s:s + 100])
    a, b = MT.ClassStats(4, 5), MT.ClassStats(4, 5)
    a.update(H[:600], y[:600])
    b.update(H[600:], y[600:])
    assert not np.array_equal(a.shift, b.shift)  # each chose its own shifts
    a.merge(b)
    cs1, S1 = one.within()
    cs2, S2 = a.within()
    ref_S = np.zeros((5, 5))
    mu = np.stack([H[y == c].mean(0) for c in range(4)])
    dev = H - mu[y]
    ref_S = dev.T @ dev
    for S in (S1, S2):
        assert np.linalg.norm(S - ref_S) <= 1e-9 * np.linalg.norm(ref_S)
    assert np.allclose(cs1, cs2, rtol=1e-9, atol=0)
    assert a.N == one.N and np.array_equal(a.counts, one.counts)


def test_given_shifts_far_from_the_data_still_exact_algebra():
    # any shift gives the same scatter algebraically; a shift at the origin is the naive formula, so with
    # non-collapsed data (no cancellation) it agrees
    H, y, _, _ = synthetic(seed=4, N=400, d=4, K=3)
    st = MT.ClassStats(3, 4, shift=np.zeros((3, 4)))
    st.update(H, y)
    ref = reference_metrics(H, y)
    got = MT.collapse_metrics(st, None).metrics
    _close(got, ref, ["nc1", "nc1_trace", "cdnv_mean"], rtol=1e-8)


def test_cli_segments_and_workers_give_identical_numbers(tmp_path, capsys):
    H, y = collapsed(N=5000, d=6, K=7, spread=1e-4, seed=5)
    np.save(tmp_path / "f.npy", H.astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    outs = []
    for w in (1, 3):
        rc = cli.main(["measure", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y.npy"), "--batch-size", "50",
                       "--workers", str(w), "--json"])
        cap = capsys.readouterr()
        assert rc == 0, cap.err
        outs.append(json.loads(cap.out))
    assert outs[0]["metrics"] == outs[1]["metrics"]  # bit for bit: fixed segments, merged in order
    assert outs[0]["instance"]["passes"].startswith("one pass")
    assert 5000 // (50 * PM.SEGMENT_CHUNKS) >= 5  # several segments were merged
    ref = reference_metrics(H.astype(np.float32).astype(np.float64), y)
    _close(outs[0]["metrics"], ref, ["nc1", "nc1_trace", "cdnv_mean", "cdnv_max", "gram_distance_etf"])


def test_cli_sorted_labels_and_weights_second_pass(tmp_path, capsys):
    # labels sorted by class: the sequential prefix reads until every class has a shift
    H, y, W, b = synthetic(seed=6, N=1500, d=5, K=6)
    o = np.argsort(y, kind="stable")
    H, y = H[o], y[o]
    np.savez(tmp_path / "a.npz", features=H.T.copy(), labels=y, weights=W, bias=b)
    rc = cli.main(["measure", str(tmp_path / "a.npz"), "--batch-size", "40", "--workers", "2", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    assert out["instance"]["layout"] == "dn" and "second pass for NC4" in out["instance"]["passes"]
    ref = reference_metrics(H, y, W, b)
    _close(out["metrics"], ref, [k for k in ref if k != "gram_distance_predicted" and ref[k]])
    assert out["metrics"]["nc4"] == ref["nc4"]
    rc = cli.main(["measure", str(tmp_path / "a.npz"), "--passes", "2", "--json"])
    two = json.loads(capsys.readouterr().out)
    _close(two["metrics"], out["metrics"], ["nc1", "nc1_trace", "cdnv_mean", "nc3"])
    assert two["instance"]["passes"].startswith("two passes")


def test_one_pass_bad_input_still_named():
    H, y, _, _ = synthetic(seed=0, N=50, d=3, K=3)
    Hn = H.copy()
    Hn[7, 1] = np.nan
    with pytest.raises(MT.InputError, match="sample 7, coordinate 1"):
        MT.measure_arrays(Hn, y, passes=1)
    with pytest.raises(MT.InputError, match="overflow"):
        MT.measure_arrays(H * 1e200, y, passes=1)
    with pytest.raises(MT.InputError, match="underflow"):
        MT.measure_arrays(H * 1e-200, y, passes=1)
    with pytest.raises(MT.InputError, match="passes"):
        MT.measure_arrays(H, y, passes=3)


def test_container_keys_and_progress_line(tmp_path, capsys):
    import io

    H, y, W, b = synthetic(seed=9, N=600, d=5, K=4)
    np.savez(tmp_path / "c.npz", emb=H, target_class=y, head=W)
    rc = cli.main(["measure", str(tmp_path / "c.npz"), "--features-key", "emb", "--labels-key", "target_class",
                   "--weights-key", "head", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    ref = reference_metrics(H, y, W)
    _close(out["metrics"], ref, ["nc1", "cdnv_mean", "nc3", "nc4"])
    assert out["instance"]["files"]["labels"].endswith("['target_class']")
    rc = cli.main(["measure", str(tmp_path / "c.npz")])
    assert rc == 2 and "no array 'features'" in capsys.readouterr().err
    rc = cli.main(["measure", str(tmp_path / "c.npz"), "--features-key", "emb", "--labels-key", "target_class",
                   "--weights-key", "nope"])
    assert rc == 2 and "nope" in capsys.readouterr().err
    # the progress line (forced on: stderr is not a terminal under pytest, so "auto" prints nothing)
    buf = io.StringIO()
    prog = PM.Progress(100, enabled=True, stream=buf, every=0.0)
    prog.stage("pass 1")
    prog.add(50)
    prog.done()
    assert "pass 1:  50.0%" in buf.getvalue() and buf.getvalue().endswith("\n")
    rc = cli.main(["measure", str(tmp_path / "c.npz"), "--features-key", "emb", "--labels-key", "target_class",
                   "--progress", "on"])
    err = capsys.readouterr().err
    assert rc == 0 and "100.0% of the samples read" in err
    rc = cli.main(["measure", str(tmp_path / "c.npz"), "--features-key", "emb", "--labels-key", "target_class"])
    assert rc == 0 and "samples read" not in capsys.readouterr().err


def test_accumulators_that_do_not_fit_fall_back_to_two_passes(tmp_path, capsys, monkeypatch):
    assert not MT.one_pass_fits(1024, copies=1, K=50_000)  # 1.6 GB per accumulator
    assert MT.one_pass_fits(512, copies=5, K=1000)
    H, y, W, b = synthetic(seed=2, N=400, d=6, K=5)
    np.savez(tmp_path / "a.npz", features=H, labels=y, weights=W)
    monkeypatch.setattr(MT, "ONE_PASS_TOTAL_BYTES", 1000.0)
    assert cli.main(["measure", str(tmp_path / "a.npz"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["instance"]["passes"].startswith("two passes") and "do not fit the budget" in out["instance"]["passes"]
    _close(out["metrics"], reference_metrics(H, y, W), ["nc1", "cdnv_mean", "nc3"])
    assert cli.main(["measure", str(tmp_path / "a.npz"), "--passes", "1"]) == 2
    assert "--passes 1 needs" in capsys.readouterr().err


_BLAS_PROBE = r"""
import json, sys
import numpy as np
from threadpoolctl import threadpool_info
from proofs_check import measure as PM
from theory import metrics_onepass as MO

seen = {}
orig_update = MO.ClassStats.update
def update(self, *a, **k):
    seen.setdefault("hot_loop", [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
    return orig_update(self, *a, **k)
MO.ClassStats.update = update
orig_metrics = PM.MT.collapse_metrics
def collapse_metrics(*a, **k):
    seen.setdefault("metrics", [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
    return orig_metrics(*a, **k)
PM.MT.collapse_metrics = collapse_metrics
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/f.npy", rng.normal(size=(600, 16)).astype(np.float32))
np.save(sys.argv[1] + "/y.npy", np.arange(600) % 4)
PM.measure(sys.argv[1] + "/f.npy", sys.argv[1] + "/y.npy", workers=2, batch_size=50)
seen["libraries"] = [i["filepath"] for i in threadpool_info() if i["user_api"] == "blas"]
print(json.dumps(seen))
"""


def test_hot_loop_and_small_metrics_run_on_one_blas_thread_in_every_blas_library(tmp_path):
    """In a fresh process (scipy's BLAS not yet loaded, as for the CLI), every BLAS library threadpoolctl sees,
    numpy's and scipy's (two OpenBLAS builds), has one thread inside the one-pass loop and the metrics stage."""
    pytest.importorskip("threadpoolctl")
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _BLAS_PROBE, str(tmp_path)], capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["hot_loop"] and seen["hot_loop"] == [1] * len(seen["libraries"]), seen
    assert seen["metrics"] == [1] * len(seen["libraries"]), seen


def test_metrics_stage_keeps_threads_only_for_large_tile_work():
    import contextlib

    assert not isinstance(PM.metrics_blas(1000, 512), contextlib.nullcontext)  # 1.8e9 flops: one thread
    assert isinstance(PM.metrics_blas(50_000, 512), contextlib.nullcontext)  # 1.3e12 flops of tiles: threaded
