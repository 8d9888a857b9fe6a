"""`ncproofs measure` refuses hostile containers before it reads their data (one line, exit 2).

Each file is built by hand so that its header promises what its data does not hold: a compressed
.npz member that would inflate to gigabytes, a safetensors header with a boolean shape or nested
thousands of levels deep, a .pt file with a sparse or meta-device tensor, and plot names that are
not figures.
"""

from __future__ import annotations

import io
import json
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from proofs_check import measure as M
from theory import metrics as MT
from theory._validate import InputError


def _npy_header_bytes(shape, dtype="<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue()


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "proofs_check", "measure", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_compressed_member_that_would_inflate_is_refused_from_its_header(tmp_path):
    f = tmp_path / "F.npz"
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("features.npy", _npy_header_bytes((40_000_000, 16)) + bytes(1024))
        zf.writestr("labels.npy", _npy_header_bytes((40_000_000,), "<i8") + bytes(1024))
    with pytest.raises(InputError, match="compressed member of shape \\(40000000, 16\\)"):
        M.measure(f)
    r = _cli(f, "--layout", "dn", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "compressed member" in r.stderr


def test_small_compressed_member_still_loads(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    y = np.repeat(np.arange(3), 10)
    f = tmp_path / "ok.npz"
    np.savez_compressed(f, features=X, labels=y)
    out = M.measure(f)
    assert out["samples"] == 30 and out["classes"] == 3


def _safetensors(path, header: bytes, data: bytes = b""):
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


@pytest.mark.parametrize("shape", [[True, 5], [2.0, 5], [-1, 5], "5"])
def test_safetensors_shape_must_be_nonnegative_integers(tmp_path, shape):
    f = tmp_path / "F.safetensors"
    hdr = json.dumps({"features": {"dtype": "F64", "shape": shape, "data_offsets": [0, 40]}}).encode()
    _safetensors(f, hdr, bytes(40))
    with pytest.raises(InputError, match="shape must be a list of non-negative integers"):
        M.open_arrays(f, "FEATURES")


def test_safetensors_deeply_nested_header_is_bad_input(tmp_path):
    f = tmp_path / "F.safetensors"
    _safetensors(f, b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(InputError, match="nested too deeply|not a JSON object|not a valid"):
        M.open_arrays(f, "FEATURES")


@pytest.mark.parametrize("name", ["p.exe", "p", "p.png/"])
def test_measure_plot_name_must_be_a_figure(tmp_path, name):
    rng = np.random.default_rng(1)
    np.save(tmp_path / "X.npy", rng.standard_normal((12, 3)))
    np.save(tmp_path / "y.npy", np.repeat(np.arange(3), 4))
    r = _cli("X.npy", "--labels", "y.npy", "--plot", name, cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--plot" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / name.rstrip("/")).exists()


def test_sparse_and_meta_tensors_are_refused(tmp_path):
    torch = pytest.importorskip("torch")
    dense = torch.zeros((6, 2), dtype=torch.float64)
    sparse = dense.to_sparse()
    f = tmp_path / "sparse.pt"
    torch.save({"features": sparse, "labels": torch.tensor([0, 0, 0, 1, 1, 1])}, f)
    with pytest.raises(InputError, match="sparse"):
        M.measure(f)
    g = tmp_path / "meta.pt"
    torch.save({"features": torch.empty((6, 2), device="meta"), "labels": torch.tensor([0, 0, 0, 1, 1, 1])}, g)
    try:
        with pytest.raises(InputError, match="meta|cannot be loaded"):
            M.measure(g)
    except RuntimeError as exc:  # pragma: no cover - a torch that cannot even save meta tensors
        pytest.skip(f"torch cannot round-trip meta tensors: {exc}")


@pytest.mark.parametrize("bad", [-1, 0, 2.5, True])
def test_estimate_seconds_refuses_impossible_sizes(bad):
    with pytest.raises(InputError, match="N must be an integer >= 1"):
        MT.estimate_seconds(bad, 4, 3)
