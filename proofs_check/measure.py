"""``ncproofs measure``: collapse metrics of a trained network's features, read from files in chunks.

Files (docs/measure.md): ``.npy`` (features; labels from ``--labels``), or ``.npz`` / ``.pt`` (a dict)
/ ``.safetensors`` holding arrays under the keys ``features`` and ``labels`` (optional ``weights``,
``bias``). The features are N x d by default; d x N is detected when only the second axis matches
the number of labels, and refused with a message naming ``--layout`` when both axes match.

Reading: ``.npy``, ``.safetensors`` and uncompressed ``.npz`` members are read with ``os.pread`` at
byte offsets, chunk by chunk (never memory-mapped: touched mmap pages would count as resident
memory), so the resident memory is O(K d + min(d, K)^2 + one chunk) whatever N is. A compressed
``.npz`` member is decompressed as a stream (row layout) or loaded whole (column layout, said in the
diagnostics); a ``.pt`` file is opened with ``torch.load(mmap=True, weights_only=True)``.

The report is a measurement with provenance (which formula, which prediction, which certificate),
never a verdict: distances come with graded words ("close to simplex ETF: Gram distance 0.04").

Modules by concern (every name is importable from here): :mod:`proofs_check.measure_io` (files,
sources, inputs, layout), :mod:`proofs_check.measure_predict` (predictions, the network's objective,
graded words), :mod:`proofs_check.measure_onepass` (the one-pass engine: chunks, workers, BLAS
threads), :mod:`proofs_check.measure_plots` (figures); this module: the measurement, regression,
checkpoints, rendering and the CLI entry.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from theory import _work
from theory import metrics as MT
from theory._validate import InputError, as_float

# The command's parts live in modules by concern; every name stays importable from here.
from proofs_check.measure_io import (_ST_DTYPES, DEFAULT_KEYS, FORMATS, KEY_DEFAULTS, LAYOUTS,  # noqa: F401
                                     MAX_COMPRESSED_MEMBER_BYTES, ArraySource, Inputs, RawSource, Source,
                                     _bf16_to_f32, _check_file, _check_inflated_member, _label_chunks, _named,
                                     _npy_header, _numeric, _open_npz, _open_pt, _open_safetensors, _pick,
                                     _st_shape, detect_layout, load_inputs, open_arrays, scan_labels)
from proofs_check.measure_onepass import (METRICS_ONE_THREAD_MAX_FLOPS, ONE_PASS_CHUNK_BYTES,  # noqa: F401
                                          _cpu_passes,
                                          SEGMENT_CHUNKS, Progress, _in_order, _nc4_pass, _one_pass, _projected_pass,
                                          _reader, _segments,
                                          _single_threaded_blas, _two_pass_reason, _workers, metrics_blas,
                                          one_pass_chunk_rows)
from proofs_check.measure_predict import (GRADES, PREDICT, UFM_CERTIFICATE_MAX_K, UFM_IMBALANCED_MAX_K,  # noqa: F401
                                          _fit_note, _network_objective, _no_prediction, _predict_scl,
                                          _predict_ufm, _predict_ufm_imbalanced, _resolve_predict,
                                          _ufm_certificate, geometry_fit, grade, graded_labels,
                                          predict_geometry, validate_prediction_options)

#: Default limit of one measurement in seconds of the cost model (:func:`theory.metrics.estimate_work`: the
#: estimated work in flop-equivalents against this x GEMM_FLOPS_PER_S, before any feature is read; the same
#: decision on every machine and at any load); ``--time-limit`` raises it.
TIME_LIMIT_S = 120.0

SOURCES = {
    "nc1": "Papyan, Han & Donoho, PNAS 2020 (NC1 = tr(Sigma_W Sigma_B^+)/K)",
    "cdnv": "Galanti, Gyorgy & Hutter, ICLR 2022 (class-distance normalised variance)",
    "geometry": "Wu & Papyan, 2024 (equinorm, equiangularity, max-equiangularity); Papyan, Han & Donoho 2020 (NC2-NC4)",
    "uniformity": "Liu et al., ICLR 2023 (hyperspherical uniformity: nc2_log_energy, nc2_uniformity_gap)",
    "duality": "Papyan et al. 2020 (self-duality); Wu & Papyan 2024 (uniform duality)",
    "nc5": "Ben Ammar et al., ICLR 2024 (NECO: NC5, ID/OOD orthogonality)",
}

#: Bytes of float64 features per chunk when --batch-size is not given.
DEFAULT_CHUNK_BYTES = MT.CHUNK_BYTES


# ---------------------------------------------------------------------------------------------
# The measurement
# ---------------------------------------------------------------------------------------------

def _device(device: str | None, diagnostics: list):
    if device in (None, "cpu"):
        return None
    if device != "cuda" and not str(device).startswith("cuda:"):
        raise InputError(f"--device must be cpu or cuda, got {device!r}")
    try:
        import torch
    except ImportError:
        diagnostics.append("--device cuda: torch is not installed; computed on the CPU with numpy")
        return None
    if not torch.cuda.is_available():
        diagnostics.append("--device cuda: CUDA is not available; computed on the CPU with numpy")
        return None
    return torch.device(device)


def _note_unused_workers(workers, one_pass: bool, route: str, diagnostics: list) -> None:
    """A typed --workers above 1 on a route that reads on one thread (the segments' threads belong to the one-pass
    route): named in the diagnostics (only ``instance.workers = 1`` said it)."""
    if workers is not None and workers > 1 and not one_pass:
        diagnostics.append(f"--workers {workers} not used: the route taken ({route.split(':')[0]}) reads on one "
                           "thread (--workers applies to the one-pass route)")


def measure(features, labels=None, weights=None, bias=None, *, layout: str = "auto", predict: str | None = None,
            lambda_w=None, lambda_h=None, tau=None, device: str | None = None, batch_size: int | None = None,
            dtype: str = "float64", keep_means: bool = False, time_limit: float | None = TIME_LIMIT_S,
            passes="auto", workers: int | None = None, ood=None, ood_key: str = "features",
            keys: dict | None = None, progress: bool = False) -> dict:
    """Measure the features in the files; return the report (a dict, JSON-ready). See docs/measure.md."""
    t0 = time.perf_counter()
    diagnostics: list = []
    model, params = validate_prediction_options(predict, lambda_w, lambda_h, tau)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                   or batch_size < 1):
        raise InputError(f"--batch-size must be an integer >= 1, got {batch_size!r}")
    if dtype not in MT.DTYPES:
        raise InputError(f"dtype must be one of {', '.join(MT.DTYPES)}, got {dtype!r}")
    if time_limit is not None:
        time_limit = as_float("--time-limit", time_limit, positive=True)
    if isinstance(passes, (bool, np.bool_)) or passes not in ("auto", 1, 2, "1", "2"):  # True == 1 ran one pass
        raise InputError(f"--passes must be auto, 1 or 2, got {passes!r}")
    for name, flag in (("progress", progress), ("keep_means", keep_means)):
        if not isinstance(flag, (bool, np.bool_)):  # 'no' is truthy
            raise InputError(f"{name} must be True or False, got {flag!r}"[:200])
    if keys is not None:
        if not isinstance(keys, dict):
            raise InputError(f"keys must be a dict like {{'features': 'x', 'labels': 'y'}}, got {type(keys).__name__}")
        for k, v in keys.items():
            if k not in ("features", "labels", "weights", "bias"):
                raise InputError(f"keys: unknown array {k!r} (features, labels, weights or bias)"[:200])
            if v is not None and (not isinstance(v, str) or not v):
                raise InputError(f"--{k}-key must be a non-empty array name, got {v!r}"[:200])
    passes = passes if passes == "auto" else int(passes)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, (int, np.integer))
                                or not 1 <= workers <= 64):
        raise InputError(f"--workers must be an integer in [1, 64], got {workers!r}")
    dev = _device(device, diagnostics)
    inp = load_inputs(features, labels, weights, bias, layout, diagnostics, keys)
    try:
        N, d = inp.N, inp.d
        step = int(batch_size) if batch_size is not None else max(1, int(DEFAULT_CHUNK_BYTES // (8 * d)))
        step = min(step, N)
        counts = scan_labels(inp, max(step, 1 << 16))
        K = int(counts.size)
        MT.check_state_budget(K, d, weights=inp.weights is not None, what="FEATURES")
        nworkers = _workers(workers)
        # the projected route keeps no d x d matrix, so it also serves a d whose one-pass scatter does not fit
        projected = dev is None and dtype == "float64" and passes == "auto" and MT.projected_route_cheaper(d, K)
        while not projected and nworkers > 1 and not MT.one_pass_fits(d, copies=nworkers + 1, K=K):
            nworkers -= 1  # fewer live accumulators before giving up the one-pass route
        one = projected or (dev is None and dtype == "float64" and passes != 2
                            and MT.one_pass_fits(d, copies=nworkers + 1, K=K))
        if passes == 1 and not one:
            raise InputError("--passes 1 needs the CPU (numpy), float64 accumulation and a d x d scatter that fits "
                             f"in memory (d = {d}); use --passes auto")
        route = "projected" if projected else ("one" if one else "two")
        est = MT.estimate_seconds(N, d, K, weights=inp.weights is not None, route=route)
        work = MT.estimate_work(N, d, K, weights=inp.weights is not None, route=route)
        if time_limit is not None and work["total_work"] > time_limit * MT.GEMM_FLOPS_PER_S:
            rate = MT.GEMM_FLOPS_PER_S
            raise InputError(
                f"FEATURES: N = {N}, d = {d}, K = {K}: "
                + _work.work_text(work["total_work"], time_limit * rate, seconds_per_unit=1.0 / rate,
                                  limit_note=f"= --time-limit {time_limit:g} x {rate:.3g} per second of the cost model")
                + f"; the passes ({route} route) {work['passes_work']:.3g}, the K x K class pairs {work['pairs_work']:.3g}; "
                "raise it with --time-limit")
        axis = 0 if inp.layout == "nd" else 1
        t1 = time.perf_counter()
        where = f"{_named('FEATURES', inp.features)}: "

        def chunks():
            for s, e in _label_chunks(inp, step):
                X = inp.features.read(s, e, axis)
                if axis == 1:
                    X = X.T
                y = inp.labels.read(s, e, 0)
                if dev is not None:
                    import torch

                    X = torch.from_numpy(np.ascontiguousarray(X)).to(dev)
                yield X, y

        c0 = time.process_time()
        if one:
            # the projected route also serves a large d: its chunks stay near 8 MiB of float64 rows there too
            rows = max(16, int(ONE_PASS_CHUNK_BYTES // (8 * d))) if projected else one_pass_chunk_rows(d)
            step = max(1, min(int(batch_size) if batch_size is not None else rows, N))
            loss = model.split("-")[1] if (model or "").startswith("ufm") else None
            acc, sc, route, t2 = _cpu_passes(inp, axis, N, K, d, step, nworkers, where, projected, loss, progress)
        else:
            prog = Progress(2 * N, enabled=progress)
            # the chunk products on the CPU run single-threaded here too (threaded BLAS collapses under load)
            with (_single_threaded_blas() if dev is None else contextlib.nullcontext()):
                acc = MT.ClassMeans(K, d, dtype=dtype, where=where)
                prog.stage("pass 1 (class means)")
                for X, y in chunks():
                    acc.update(X, y)
                    prog.add(len(y))
                    del X
                t2 = time.perf_counter()
                sc = MT.ClassScatter(acc, inp.weights, inp.bias)
                prog.stage("pass 2 (scatter)")
                for X, y in chunks():
                    sc.update(X, y)
                    prog.add(len(y))
                    del X
            prog.done()
            route = "two passes (class means, then the scatter about them)" + (
                "" if passes == 2 else f": {_two_pass_reason(dev, dtype, d, nworkers)}")
        t3 = time.perf_counter()
        cpu_passes = time.process_time() - c0
        _note_unused_workers(workers, one, route, diagnostics)
        ood_mean = _ood_mean(ood, d, (keys or {}).get("features") or ood_key, diagnostics) if ood is not None else None
        pred = predict_geometry(model, params, counts, d, acc.min_value)
        objective = _network_objective(model, params, pred["record"], sc, acc, inp, one)
        with (metrics_blas(K, d) if dev is None else contextlib.nullcontext()):
            res = MT.collapse_metrics(acc, sc, predicted=pred["gram"], predicted_reason=pred["reason"],
                                      ood_mean=ood_mean)
        t4 = time.perf_counter()
        record = pred["record"]
        if record is not None and pred.get("compare"):
            record["compare_key"] = pred["compare"]
        elif record is not None and record.get("geometry"):
            record["compare_key"] = "gram_distance_predicted"
        out = {
            "family": "measure",
            "kind": "measurement (not a verdict): collapse metrics of given features, with provenance",
            "instance": {"files": inp.files, "layout": inp.layout, "layout_reason": inp.layout_reason,
                         "features_dtype": str(inp.features.dtype), "accumulation": dtype,
                         "device": str(dev) if dev is not None else "cpu (numpy)", "batch_size": step,
                         "passes": route, "workers": nworkers if one else 1},
            **res.to_dict(),
            "predicted": record,
            "labels": graded_labels(res.metrics, record, K, d),
            "geometry_fit": geometry_fit(K, d),
            "network_objective": objective,
            "provenance": {"definitions": "docs/metrics.md (theory/metrics.py)", "sources": SOURCES,
                           "prediction": None if record is None else record.get("source"),
                           "certificate": None if record is None else record.get("certificate")},
            "diagnostics": diagnostics,
            "timing": {"labels_and_open_s": round(t1 - t0, 4), "pass1_s": round(t2 - t1, 4),
                       "pass2_s": round(t3 - t2, 4), "metrics_s": round(t4 - t3, 4),
                       "passes_cpu_s": round(cpu_passes, 4)},
            "seconds": round(time.perf_counter() - t0, 4),
            "estimate": {k: round(v, 3) for k, v in est.items()},
        }
        if keep_means:
            out["_centred_means"] = (acc.numpy_state()["Mr"] if one and not projected else sc.numpy_state()["Mr"])
        return out
    finally:
        inp.close()


def _ood_mean(path, d: int, key: str, diagnostics: list) -> np.ndarray:
    """Mean of the out-of-distribution features in ``path`` (.npy, or a container's ``key``), streamed."""
    arrays = open_arrays(path, "--ood", diagnostics)
    srcs = [v for v in arrays.values() if isinstance(v, Source)]
    try:
        src = _pick(arrays, key, path, "--ood", True)
        _numeric(src, "--ood")
        if len(src.shape) != 2 or d not in src.shape:
            raise InputError(f"--ood: {src.name} must be N_ood x d with d = {d}, got shape {src.shape}")
        axis = 0 if src.shape[1] == d else 1
        n = src.shape[axis]
        if n == 0:
            raise InputError(f"--ood: {src.name} has no samples")
        total = np.zeros(d)
        step = max(1, int(DEFAULT_CHUNK_BYTES // (8 * d)))
        for s in range(0, n, step):
            X = np.asarray(src.read(s, min(n, s + step), axis), dtype=np.float64)
            X = X if axis == 0 else X.T
            part = X.sum(axis=0)
            if not np.isfinite(part).all():
                raise InputError(f"--ood: {src.name} must contain only finite numbers (found NaN or inf)")
            total += part
        return total / n
    finally:
        for s_ in srcs:
            s_.close()


def measure_regression(features, targets=None, weights=None, *, layout: str = "auto", batch_size: int | None = None,
                       features_key: str = "features", targets_key: str = "targets",
                       weights_key: str = "weights") -> dict:
    """NRC1-3 of regression features (docs/metrics.md, "Regression"): two streaming passes."""
    t0 = time.perf_counter()
    diagnostics: list = []
    srcs: list = []
    try:
        keys = DEFAULT_KEYS + (features_key, targets_key, weights_key)
        main = open_arrays(features, "FEATURES", diagnostics, keys)
        srcs.extend(v for v in main.values() if isinstance(v, Source))
        feat = _pick(main, features_key, features, "FEATURES", True)
        files = {"features": str(features)}
        if targets is not None:
            ta = open_arrays(targets, "--targets", diagnostics, keys)
            srcs.extend(v for v in ta.values() if isinstance(v, Source))
            tsrc = _pick(ta, targets_key, targets, "--targets", True)
            files["targets"] = str(targets)
        else:
            if "__single__" in main:
                raise InputError("--targets: a .npy features file needs the targets from --targets")
            tsrc = _pick(main, targets_key, features, "FEATURES", True)
            files["targets"] = f"{features}['{targets_key}']"
        W = None
        if weights is not None:
            wa = open_arrays(weights, "--weights", diagnostics, keys)
            srcs.extend(v for v in wa.values() if isinstance(v, Source))
            W = np.asarray(_pick(wa, weights_key, weights, "--weights", True).read_all(), dtype=np.float64)
        elif "__single__" not in main and weights_key in main:
            W = np.asarray(main[weights_key].read_all(), dtype=np.float64)
        _numeric(feat, "FEATURES")
        _numeric(tsrc, "--targets")
        if len(feat.shape) != 2:
            raise InputError(f"{_named('FEATURES', feat)} must be 2-dimensional (N x d), got shape {feat.shape}")
        if len(tsrc.shape) not in (1, 2):
            raise InputError(f"--targets: {tsrc.name} must be N or N x n, got shape {tsrc.shape}")
        Nt = tsrc.shape[0]
        n = 1 if len(tsrc.shape) == 1 else tsrc.shape[1]
        if Nt == 0 or n == 0:
            raise InputError(f"--targets: {tsrc.name} is empty (shape {tsrc.shape})")
        try:
            lay, why = detect_layout(feat.shape, Nt, layout)
        except InputError as exc:
            if "--layout" in str(exc) and "both axes" not in str(exc):
                raise
            raise InputError(f"--targets: {tsrc.name} has {Nt} rows but the features are {feat.shape[0]} x "
                             f"{feat.shape[1]}: one target row per sample is needed") from None
        N, d = feat.shape if lay == "nd" else feat.shape[::-1]
        axis = 0 if lay == "nd" else 1
        step = int(batch_size) if batch_size else max(1, int(DEFAULT_CHUNK_BYTES // (8 * d)))
        st = MT.RegressionStats(d, n, where=f"{_named('FEATURES', feat)}: ")

        def chunks():
            for s0 in range(0, N, step):
                e = min(N, s0 + step)
                X = feat.read(s0, e, axis)
                yield (X if axis == 0 else X.T), tsrc.read(s0, e, 0)

        for X, Y in chunks():
            st.update1(X, Y)
        for X, _Y in chunks():
            st.update2(X)
        res = MT.regression_metrics(st, W)
        return {"family": "measure", "kind": "measurement (not a verdict): neural regression collapse NRC1-3",
                "instance": {"files": files, "layout": lay, "layout_reason": why, "targets_dim": n},
                "metrics": res.metrics, "reasons": res.reasons, "samples": N, "dim": d, **res.extra,
                "provenance": {"definitions": "docs/metrics.md, 'Regression' (theory/metrics.py)",
                               "sources": {"nrc": "Andriopoulos et al., NeurIPS 2024 (neural regression collapse)"}},
                "diagnostics": diagnostics, "seconds": round(time.perf_counter() - t0, 4)}
    finally:
        for s_ in srcs:
            s_.close()


def render_regression(out: dict) -> str:
    lines = [f"measure (regression): {out['samples']} samples, d = {out['dim']}, {out['instance']['targets_dim']} "
             "target(s)", "metrics (docs/metrics.md, 'Regression'):"]
    for k in MT.REGRESSION_KEYS:
        v = out["metrics"].get(k)
        lines.append(f"  {k:<24} " + (f"{v:.6g}" if v is not None else f"null ({out['reasons'].get(k, '')})"))
    lines.append("(a measurement, not a verdict)")
    return "\n".join(lines)


def render(out: dict) -> str:
    """A readable summary of a measure report."""
    m = out["metrics"]
    lines = [f"measure: {out['samples']} samples, {out['classes']} classes, d = {out['dim']} "
             f"(layout {out['instance']['layout']}: {out['instance']['layout_reason']})",
             f"counts: min {min(out['counts'])}, max {max(out['counts'])}",
             "metrics (docs/metrics.md):"]
    for k in MT.ALL_KEYS:
        v = m.get(k)
        lines.append(f"  {k:<24} " + (f"{v:.6g}" if v is not None else f"null ({out['reasons'].get(k, '')})"))
    pred = out.get("predicted")
    if pred is not None:
        if pred.get("geometry"):
            lines.append(f"prediction: {pred['geometry']} ({pred['model']}; {pred.get('source')})")
        else:
            lines.append(f"prediction: none: {pred.get('reason')}")
        cert = pred.get("certificate")
        if cert:
            gap = cert.get("gap")
            gap_s = f"{gap:.3g}" if isinstance(gap, (int, float)) else "n/a"
            lines.append("certificate: " + (f"{cert.get('method')} ({cert.get('verdict_of_the_model_check')} for the "
                                            f"model, gap {gap_s})" if cert.get("run") else cert.get("reason", "")))
    obj = out.get("network_objective")
    if obj:
        if obj.get("value") is None:
            lines.append(f"network UFM objective: not computed ({obj.get('reason')})")
        else:
            fs = obj.get("certified_optimum")
            lines.append(f"network UFM objective ({obj['loss']}): f = {obj['value']:.8g}" + (
                f"; certified optimum f* = {fs:.8g}, gap f - f* = {obj['gap']:.3g} "
                f"({100 * obj['relative_gap']:.3g}% of f*)" if fs is not None and obj.get('relative_gap') is not None
                else "; no certified optimum for this instance"))
            if obj.get("note"):
                lines.append(f"  note: {obj['note']}")
    for lab in out.get("labels", []):
        lines.append(f"  {lab}")
    for dgn in out.get("diagnostics", []):
        lines.append(f"note: {dgn}")
    lines.append("(a measurement, not a verdict)")
    return "\n".join(lines)


def plot(out: dict, Mr: np.ndarray, path) -> None:
    """Cosines of the centred class means (up to 64 classes) and the Gram distances, with axis labels and a
    title, drawn in ncproofs' figure style (proofs_check.measure_plots: Type 42 fonts in PDF)."""
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    from proofs_check.measure_plots import _style_context
    from proofs_check.outputs import write_bytes_atomic

    K = Mr.shape[0]
    k = min(K, 64)
    R = Mr[:k]
    nr = np.linalg.norm(R, axis=1)
    ok = nr > 0
    C = np.full((k, k), np.nan)
    Rn = R[ok] / nr[ok, None]
    C[np.ix_(ok, ok)] = Rn @ Rn.T
    ext = str(path).rsplit(".", 1)[-1].lower()
    with _style_context():
        fig, ax = plt.subplots(1, 2, figsize=(9, 4))
        im = ax[0].imshow(C, vmin=-1, vmax=1, cmap="RdBu_r")
        ax[0].set_title(f"cosines of centred class means ({k} of {K})")
        ax[0].set_xlabel("class $c'$")
        ax[0].set_ylabel("class $c$")
        fig.colorbar(im, ax=ax[0], fraction=0.046, label=r"$\cos(M_c, M_{c'})$")
        m = out["metrics"]
        names = [("gram_distance_etf", "ETF"), ("gram_distance_of", "OF"), ("gram_distance_predicted", "predicted")]
        vals = [(lab, m.get(key)) for key, lab in names if m.get(key) is not None]
        ax[1].bar([v[0] for v in vals], [v[1] for v in vals], color="tab:blue")
        ax[1].set_xlabel("reference geometry")
        ax[1].set_ylabel("normalised Gram distance (0 to 2)")
        ax[1].set_title("distance of the measured geometry")
        fig.suptitle(f"ncproofs measure: N = {out['samples']}, K = {K}, d = {out['dim']}")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format=ext if ext in ("png", "pdf", "svg") else "png", dpi=110)
        plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())


def to_json(out: dict) -> str:
    from proofs_check.envelope import envelope

    clean = {k: v for k, v in out.items() if not k.startswith("_")}
    return json.dumps(envelope("measure", clean), indent=2, allow_nan=False, default=_json_default)


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _keys_from_args(args) -> dict:
    return {k: getattr(args, f"{k}_key", None) for k in ("features", "labels", "weights", "bias")}


def _want_progress(args) -> bool:
    mode = getattr(args, "progress", "auto")
    if mode == "auto":
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False
    return mode == "on"


_GLOB_CHARS = set("*?[")


def checkpoint_files(spec: str, labels=None) -> list[Path] | None:
    """The files of ``measure CHECKPOINT_DIR_OR_GLOB`` (None when ``spec`` is one file): a directory's files of
    the supported formats, or a glob pattern's matches, sorted by the epoch in the name (its last integer)."""
    import glob

    sp = str(spec)
    if os.path.isdir(sp):
        files = [Path(sp) / f for f in os.listdir(sp)]
    elif _GLOB_CHARS & set(sp) and not os.path.exists(sp):
        files = [Path(f) for f in glob.glob(sp)]
    else:
        return None
    lab = Path(labels).resolve() if labels else None
    files = [f for f in files if f.is_file() and f.suffix.lower() in FORMATS and (lab is None or f.resolve() != lab)]
    if not files:
        raise InputError(f"FEATURES: {spec} holds no checkpoint files ({', '.join(FORMATS)})")
    return sorted(files, key=lambda f: (checkpoint_epoch(f, -1), f.name))


def checkpoint_epoch(path, default: int) -> int:
    import re

    nums = re.findall(r"\d+", Path(path).stem)
    return int(nums[-1]) if nums else default


#: Columns of the checkpoint table (text and JSON).
TABLE_KEYS = ("nc1", "nc1_trace", "cdnv_mean", "equinorm", "equiangularity", "gram_distance_etf",
              "gram_distance_predicted", "nc3", "nc4")


def measure_checkpoints(files: list[Path], **kw) -> dict:
    """Measure every checkpoint file (the same options for each); rows in epoch order."""
    t0 = time.perf_counter()
    rows = []
    for i, f in enumerate(files):
        out = measure(str(f), **kw)
        rows.append({"file": str(f), "epoch": checkpoint_epoch(f, i), "metrics": out["metrics"],
                     "reasons": out["reasons"], "samples": out["samples"], "classes": out["classes"],
                     "dim": out["dim"], "labels": out["labels"], "network_objective": out.get("network_objective"),
                     "predicted": out.get("predicted")})
    return {"family": "measure", "kind": "measurement (not a verdict): collapse metrics of many checkpoints",
            "checkpoints": rows, "columns": list(TABLE_KEYS),
            "provenance": {"definitions": "docs/metrics.md (theory/metrics.py)", "sources": SOURCES},
            "seconds": round(time.perf_counter() - t0, 4)}


def render_checkpoints(out: dict) -> str:
    rows = out["checkpoints"]
    head = ["epoch"] + list(TABLE_KEYS)
    lines = [f"measure: {len(rows)} checkpoints (metrics: docs/metrics.md)", "  ".join(f"{h:>12}" for h in head)]
    for r in rows:
        cells = [f"{r['epoch']:>12d}"] + [f"{r['metrics'][k]:>12.4g}" if r["metrics"].get(k) is not None
                                          else f"{'null':>12}" for k in TABLE_KEYS]
        lines.append("  ".join(cells))
    lines.append("(a measurement, not a verdict)")
    return "\n".join(lines)


def main_from_args(args) -> int:
    from proofs_check.outputs import check_output_path

    if args.plot:
        from proofs_check.plots import check_plot_path

        check_plot_path(args.plot)  # suffix .png/.pdf/.svg, as `solve --plot`
    plot_path = check_output_path(args.plot, "--plot") if args.plot else None
    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise InputError("--plot needs matplotlib (pip install 'ncproofs[plots]')") from None
    files = checkpoint_files(args.features, args.labels)
    if files is not None:
        out = measure_checkpoints(files, labels=args.labels, weights=args.weights, bias=args.bias, layout=args.layout,
                                  predict=args.predict, lambda_w=args.lambda_w, lambda_h=args.lambda_h, tau=args.tau,
                                  device=args.device, batch_size=args.batch_size, time_limit=args.time_limit,
                                  passes=getattr(args, "passes", "auto"), workers=getattr(args, "workers", None),
                                  ood=getattr(args, "ood", None), keys=_keys_from_args(args),
                                  progress=_want_progress(args))
        if plot_path is not None:
            from proofs_check.measure_plots import epochs_figure

            epochs_figure(out["checkpoints"], plot_path)
            out["plot"] = str(plot_path)
        print(to_json(out) if args.json else render_checkpoints(out))
        return 0
    if getattr(args, "targets", None) is not None:
        for opt, v in (("--labels", args.labels), ("--bias", args.bias), ("--predict", args.predict),
                       ("--ood", getattr(args, "ood", None))):
            if v is not None:
                raise InputError(f"--targets: regression features (NRC1-3) take no {opt}; drop {opt} or --targets")
        k = _keys_from_args(args)
        out = measure_regression(args.features, args.targets, args.weights, layout=args.layout,
                                 batch_size=args.batch_size, features_key=k.get("features") or "features",
                                 targets_key=getattr(args, "targets_key", None) or "targets",
                                 weights_key=k.get("weights") or "weights")
        print(to_json(out) if args.json else render_regression(out))
        return 0
    out = measure(args.features, args.labels, args.weights, args.bias, layout=args.layout, predict=args.predict,
                  lambda_w=args.lambda_w, lambda_h=args.lambda_h, tau=args.tau, device=args.device,
                  batch_size=args.batch_size, keep_means=plot_path is not None, time_limit=args.time_limit,
                  passes=getattr(args, "passes", "auto"), workers=getattr(args, "workers", None),
                  ood=getattr(args, "ood", None), keys=_keys_from_args(args),
                  progress=_want_progress(args))
    if plot_path is not None:
        plot(out, out["_centred_means"], plot_path)
        out["instance"]["plot"] = str(plot_path)
    if args.json:
        for dgn in out["diagnostics"]:
            print(f"ncproofs: note: {dgn}", file=sys.stderr)
    print(to_json(out) if args.json else render(out))
    return 0
