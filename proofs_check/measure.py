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
"""

from __future__ import annotations

import json
import math
import os
import stat
import struct
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from theory import metrics as MT
from theory._validate import InputError, as_float

FORMATS = (".npy", ".npz", ".pt", ".pth", ".safetensors")
LAYOUTS = ("auto", "nd", "dn")
PREDICT = ("ufm-ce", "ufm-mse", "scl", "auto")

#: Largest K for which the UFM closed form's KKT certificate (class-reduced, O(K^2) memory, ~3 s at
#: K = 1000 on 2 cores, O(K^3)) is run; above it the prediction is reported with the certificate marked
#: "not run" (``ncproofs solve ufm-ce`` runs it on its own).
UFM_CERTIFICATE_MAX_K = 1000

#: Default wall-clock limit of one measurement, checked against :func:`theory.metrics.estimate_seconds`
#: before any feature is read (preamble: every input ends within ~2 minutes on 2 cores or is refused);
#: ``--time-limit`` raises it.
TIME_LIMIT_S = 120.0

#: Graded words for a normalised Gram distance (a Frobenius distance between unit-norm matrices, in
#: [0, 2]). The thresholds only choose the word; the number is always printed next to it and no
#: statement is decided from it (a measurement is not a verdict).
GRADES = ((0.05, "close to"), (0.2, "near"), (0.5, "partway to"), (math.inf, "far from"))

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
# Array sources: 2-D or 1-D arrays read in chunks along the sample axis
# ---------------------------------------------------------------------------------------------

_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "bf16", "I64": "<i8", "I32": "<i4", "I16": "<i2",
              "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?"}


def _bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


class Source:
    """An array (1-D or 2-D) in a file. ``shape``, ``dtype`` (numpy dtype or "bf16"), ``name`` (for messages)."""

    name: str
    shape: tuple
    dtype: object

    def kind(self) -> str:
        if self.dtype == "bf16":
            return "f"
        return np.dtype(self.dtype).kind

    def read(self, start: int, stop: int, axis: int) -> np.ndarray:
        """Entries [start, stop) along ``axis`` (0 for 1-D arrays), as a new native-endian array."""
        raise NotImplementedError

    def read_all(self) -> np.ndarray:
        return self.read(0, self.shape[0], 0) if self.shape else self.read(0, 1, 0)

    def close(self) -> None:
        pass


class RawSource(Source):
    """A C-ordered (or Fortran-ordered) array stored raw at a byte offset of a file: read with os.pread."""

    def __init__(self, path: Path, name: str, offset: int, shape: tuple, dtype, fortran: bool = False):
        self.path, self.name, self.offset = path, name, int(offset)
        self.shape, self.dtype, self.fortran = tuple(int(s) for s in shape), dtype, bool(fortran)
        self.item = 2 if dtype == "bf16" else np.dtype(dtype).itemsize
        self.fd = os.open(path, os.O_RDONLY)
        size = os.fstat(self.fd).st_size
        need = self.offset + self.item * int(np.prod(self.shape, dtype=np.int64))
        if size < need:
            os.close(self.fd)
            raise InputError(f"{name}: the file is truncated ({size} bytes, the header announces {need})")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _pread(self, nbytes: int, pos: int) -> bytes:
        buf = bytearray(nbytes)
        view = memoryview(buf)
        got = 0
        while got < nbytes:
            n = os.preadv(self.fd, [view[got:]], pos + got)
            if n == 0:
                raise InputError(f"{self.name}: the file is truncated (read past its end)")
            got += n
        return buf

    def _decode(self, buf, count_shape) -> np.ndarray:
        if self.dtype == "bf16":
            return _bf16_to_f32(np.frombuffer(buf, dtype="<u2").reshape(count_shape))
        dt = np.dtype(self.dtype)
        a = np.frombuffer(buf, dtype=dt).reshape(count_shape)
        if not dt.isnative and dt.byteorder not in ("=", "|"):
            a = a.astype(dt.newbyteorder("="))
        return a

    def read(self, start: int, stop: int, axis: int) -> np.ndarray:
        if len(self.shape) == 1:
            return self._decode(self._pread((stop - start) * self.item, self.offset + start * self.item), (stop - start,))
        a, b = self.shape
        # stored rows x cols in C order: (a, b) unless Fortran ((b, a) stored, logical transpose)
        R, C = (b, a) if self.fortran else (a, b)
        stored_axis = (1 - axis) if self.fortran else axis
        n = stop - start
        if stored_axis == 0:
            out = self._decode(self._pread(n * C * self.item, self.offset + start * C * self.item), (n, C))
        else:
            buf = bytearray(R * n * self.item)
            step = n * self.item
            for i in range(R):
                buf[i * step: (i + 1) * step] = self._pread(step, self.offset + (i * C + start) * self.item)
            out = self._decode(buf, (R, n))
        return out.T if self.fortran else out


class ArraySource(Source):
    """An array already in memory (a compressed .npz member, a .pt tensor, a test)."""

    def __init__(self, name: str, array):
        self.name, self.array = name, array
        self.shape = tuple(int(s) for s in array.shape)
        if type(array).__module__.split(".")[0] == "torch":
            import torch

            self.dtype = "bf16" if array.dtype == torch.bfloat16 else torch.empty(0, dtype=array.dtype).numpy().dtype
        else:
            self.dtype = array.dtype

    def read(self, start: int, stop: int, axis: int) -> np.ndarray:
        a = self.array
        sl = a[start:stop] if axis == 0 else a[:, start:stop]
        if type(sl).__module__.split(".")[0] == "torch":
            import torch

            if sl.dtype == torch.bfloat16:
                sl = sl.to(torch.float32)
            return sl.detach().cpu().contiguous().numpy().copy()
        return np.array(sl)


def _npy_header(f, name: str):
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=100_000)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=100_000)
    except (ValueError, OSError, SyntaxError) as exc:
        raise InputError(f"{name}: not a valid .npy array ({' '.join(str(exc).split())[:120]})") from None
    if dtype.hasobject:
        raise InputError(f"{name}: holds Python objects (dtype {dtype}); save a numeric array")
    return tuple(shape), bool(fortran), dtype


def _check_file(path, what: str) -> Path:
    if path is None or str(path) == "":
        raise InputError(f"{what}: no file given")
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"{what}: a path is needed, got {type(path).__name__}")
    if "\x00" in str(os.fspath(path)):  # os.stat: ValueError('embedded null byte'), naming nothing
        raise InputError(f"{what}: the path contains a NUL character")
    p = Path(os.fspath(path)).expanduser()
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what}: no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"{what}: cannot open {path} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what}: {path} is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what}: {path} is not a regular file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{what}: {path} is not readable")
    suffix = p.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{what}: {path}: unknown format {suffix or '(no extension)'!r}; use .npy, .npz, .pt or "
                         ".safetensors")
    return p


#: Container keys read by default (``--features-key`` etc. add others).
DEFAULT_KEYS = ("features", "labels", "weights", "bias", "targets")
KEY_DEFAULTS = {"features": "features", "labels": "labels", "weights": "weights", "bias": "bias"}


def open_arrays(path, what: str, diagnostics: list | None = None, keys=None) -> dict:
    """The arrays of a file as Sources: {"features": ...} for .npy, every key of a container otherwise."""
    diagnostics = [] if diagnostics is None else diagnostics
    p = _check_file(path, what)
    suffix = p.suffix.lower()
    if suffix == ".npy":
        with open(p, "rb") as f:
            shape, fortran, dtype = _npy_header(f, f"{what} {p}")
            off = f.tell()
        return {"__single__": RawSource(p, f"{what} {p}", off, shape, dtype, fortran)}
    if suffix == ".npz":
        return _open_npz(p, what, diagnostics, tuple(keys) if keys else DEFAULT_KEYS)
    if suffix == ".safetensors":
        return _open_safetensors(p, what)
    return _open_pt(p, what)


def _open_npz(p: Path, what: str, diagnostics: list, keys=DEFAULT_KEYS) -> dict:
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{what}: {p} is not a valid .npz archive ({exc})") from None
    out = {}
    with zf:
        for info in zf.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if key not in keys:
                out.setdefault("__other__", []).append(key)
                continue
            name = f"{what} {p}['{key}']"
            if info.compress_type == zipfile.ZIP_STORED:
                with open(p, "rb") as f:
                    f.seek(info.header_offset)
                    hdr = f.read(30)
                    if len(hdr) < 30 or hdr[:4] != b"PK\x03\x04":
                        raise InputError(f"{name}: corrupt zip entry")
                    fnlen, extralen = struct.unpack("<HH", hdr[26:30])
                    f.seek(info.header_offset + 30 + fnlen + extralen)
                    shape, fortran, dtype = _npy_header(f, name)
                    off = f.tell()
                out[key] = RawSource(p, name, off, shape, dtype, fortran)
            else:
                try:
                    with zf.open(info) as member:
                        _check_inflated_member(member, info, name)
                    with zf.open(info) as member:
                        arr = np.lib.format.read_array(member, allow_pickle=False)
                except InputError:
                    raise
                except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
                    raise InputError(f"{name}: cannot be read ({' '.join(str(exc).split())[:120]})") from None
                diagnostics.append(f"{name} is compressed: loaded into memory ({arr.nbytes / 1e6:.3g} MB); "
                                   "np.savez (uncompressed) files are read in chunks")
                out[key] = ArraySource(name, arr)
    others = out.pop("__other__", [])
    if not out and others:
        out["__keys__"] = others
    return out


#: Largest compressed ``.npz`` member loaded into memory (bytes of the decompressed array): such a
#: member is loaded whole, so its size is checked from its .npy header before any data is
#: decompressed (a 5 MB file can hold a 5 GB member). np.savez (uncompressed) files are streamed.
MAX_COMPRESSED_MEMBER_BYTES = 1 << 30


def _check_inflated_member(member, info, name: str) -> None:
    """Refuse a compressed member whose decompressed array exceeds the in-memory budget (header only)."""
    shape, _fortran, dtype = _npy_header(member, name)
    nbytes = int(np.prod([int(s) for s in shape], dtype=object)) * int(dtype.itemsize)
    limit = MAX_COMPRESSED_MEMBER_BYTES
    if nbytes > limit:
        raise InputError(f"{name}: a compressed member of shape {tuple(int(s) for s in shape)} ({nbytes / 1e9:.3g} GB "
                         f"decompressed, {info.compress_size / 1e6:.3g} MB in the file) exceeds the "
                         f"{limit / 1e9:.3g} GB limit for compressed members; save it with np.savez (uncompressed: read "
                         "in chunks) or as .npy")


def _st_shape(info, name: str) -> tuple:
    shape = info["shape"]
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                              for s in shape):
        raise InputError(f"{name}: shape must be a list of non-negative integers, got {shape!r:.80}")
    return tuple(shape)


def _open_safetensors(p: Path, what: str) -> dict:
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise InputError(f"{what}: {p} is not a valid .safetensors file (shorter than 8 bytes)")
        n = struct.unpack("<Q", head)[0]
        if n > min(size - 8, 100_000_000):
            raise InputError(f"{what}: {p} is not a valid .safetensors file (header length {n})")
        try:
            header = json.loads(f.read(n))
        except RecursionError:
            raise InputError(f"{what}: {p} is not a valid .safetensors file (header nested too deeply)") from None
        except (ValueError, UnicodeDecodeError):
            raise InputError(f"{what}: {p} is not a valid .safetensors file (header is not JSON)") from None
    if not isinstance(header, dict):
        raise InputError(f"{what}: {p} is not a valid .safetensors file (header is not a JSON object)")
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        name = f"{what} {p}['{key}']"
        try:
            dt = _ST_DTYPES[info["dtype"]]
            shape = _st_shape(info, name)
            offsets = info["data_offsets"]
            if not (isinstance(offsets, list) and len(offsets) == 2
                    and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in offsets)):
                raise ValueError(offsets)
            begin, end = offsets
        except InputError:
            raise
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{name}: unsupported or malformed entry {info!r:.120}") from None
        item = 2 if dt == "bf16" else np.dtype(dt).itemsize
        if end - begin != item * int(np.prod(shape, dtype=np.int64)):
            raise InputError(f"{name}: data size {end - begin} does not match shape {shape} of {info['dtype']}")
        out[key] = RawSource(p, name, 8 + n + begin, shape, dt)
    return out


def _open_pt(p: Path, what: str) -> dict:
    try:
        import torch
    except ImportError:
        raise InputError(f"{what}: reading {p} needs torch (pip install 'ncproofs[torch]'); or save the arrays as "
                         ".npz / .safetensors") from None
    obj = None
    err = None
    for kw in ({"mmap": True}, {}):
        try:
            obj = torch.load(p, map_location="cpu", weights_only=True, **kw)
            break
        except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file; reported as bad input
            err = exc
    if obj is None:
        raise InputError(f"{what}: {p} cannot be loaded by torch.load(weights_only=True) "
                         f"({type(err).__name__}: {' '.join(str(err).split())[:120]})")
    if not isinstance(obj, dict):
        raise InputError(f"{what}: {p} must hold a dict with keys 'features' and 'labels' (optional 'weights', "
                         f"'bias'), got a {type(obj).__name__}")
    out = {}
    for key, val in obj.items():
        name = f"{what} {p}['{key}']"
        if isinstance(val, torch.Tensor):
            if val.layout != torch.strided:
                raise InputError(f"{name}: a {str(val.layout).replace('torch.', '')} tensor; save a dense tensor "
                                 "(tensor.to_dense())")
            if val.device.type != "cpu" or val.is_meta:
                raise InputError(f"{name}: a tensor on device {val.device.type!r} holds no data that can be read; "
                                 "save a CPU tensor")
            out[str(key)] = ArraySource(name, val)
        elif isinstance(val, np.ndarray):
            out[str(key)] = ArraySource(name, val)
    return out


# ---------------------------------------------------------------------------------------------
# Inputs: features, labels, weights, bias; layout detection
# ---------------------------------------------------------------------------------------------

@dataclass
class Inputs:
    features: Source
    labels: Source
    weights: np.ndarray | None
    bias: np.ndarray | None
    layout: str  # "nd" | "dn"
    N: int
    d: int
    layout_reason: str
    files: dict = field(default_factory=dict)
    sources: list = field(default_factory=list)

    def close(self) -> None:
        for s in self.sources:
            s.close()


def _pick(arrays: dict, key: str, path, what: str, required: bool):
    if "__single__" in arrays:
        return arrays["__single__"]
    if key in arrays:
        return arrays[key]
    if required:
        keys = [k for k in arrays if not k.startswith("__")] + list(arrays.get("__keys__", []))
        raise InputError(f"{what}: {path} has no array '{key}' (keys: {', '.join(sorted(keys)) or 'none'})")
    return None


def _numeric(src: Source, what: str) -> None:
    k = src.kind()
    if k not in "fiu":
        raise InputError(f"{_named(what, src)} must hold real numbers, got dtype {src.dtype}")


def _named(what: str, src) -> str:
    """``FEATURES X.npy`` (a source's name already starts with the parameter: not ``FEATURES: FEATURES X.npy``)."""
    name = str(getattr(src, "name", src))
    return name if name.split(" ", 1)[0].rstrip(":") == what else f"{what}: {name}"


def detect_layout(shape: tuple, n_labels: int, layout: str, what: str = "FEATURES") -> tuple[str, str]:
    """("nd" | "dn", why) for 2-D features of ``shape`` and ``n_labels`` labels (InputError when it cannot)."""
    if layout not in LAYOUTS:
        raise InputError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    a, b = shape
    if layout == "nd":
        if a != n_labels:
            hint = " (the columns match: use --layout dn or --layout auto)" if b == n_labels else ""
            raise InputError(f"{what}: features are {a} x {b} read as N x d (--layout nd) but there are {n_labels} "
                             f"labels{hint}")
        return "nd", "given (--layout nd)"
    if layout == "dn":
        if b != n_labels:
            hint = " (the rows match: use --layout nd or --layout auto)" if a == n_labels else ""
            raise InputError(f"{what}: features are {a} x {b} read as d x N (--layout dn) but there are {n_labels} "
                             f"labels{hint}")
        return "dn", "given (--layout dn)"
    if a == n_labels and b == n_labels:
        raise InputError(f"{what}: features are {a} x {b} and there are {n_labels} labels: both axes could be the "
                         "samples; name the sample axis with --layout nd (rows are samples) or --layout dn (columns "
                         "are samples)")
    if a == n_labels:
        return "nd", f"detected: rows match the {n_labels} labels (N x d)"
    if b == n_labels:
        return "dn", f"detected: columns match the {n_labels} labels (d x N)"
    raise InputError(f"{what}: features are {a} x {b} but there are {n_labels} labels: one label per sample is "
                     "needed (N must be the number of rows or of columns)")


def load_inputs(features, labels=None, weights=None, bias=None, layout: str = "auto",
                diagnostics: list | None = None, keys: dict | None = None) -> Inputs:
    """Open the files, pick the arrays, check shapes and detect the layout (nothing is read in bulk).

    ``keys`` renames the container keys: {"features": ..., "labels": ..., "weights": ..., "bias": ...}
    (``--features-key`` etc.)."""
    diagnostics = [] if diagnostics is None else diagnostics
    kf = dict(KEY_DEFAULTS, **{k: v for k, v in (keys or {}).items() if v})
    wanted = DEFAULT_KEYS + tuple(kf.values())
    srcs: list = []
    try:
        main = open_arrays(features, "FEATURES", diagnostics, wanted)
        srcs.extend(v for v in main.values() if isinstance(v, Source))
        single = "__single__" in main
        feat = _pick(main, kf["features"], features, "FEATURES", True)
        files = {"features": str(features) if single else f"{features}['{kf['features']}']"}

        def from_option(path, key, opt):
            arrs = open_arrays(path, opt, diagnostics, wanted)
            srcs.extend(v for v in arrs.values() if isinstance(v, Source))
            files[key] = str(path)
            return _pick(arrs, kf[key], path, opt, True)

        if labels is not None:
            lab = from_option(labels, "labels", "--labels")
        elif single:
            raise InputError(f"--labels: a .npy features file ({features}) needs the labels from --labels (or save "
                             "features and labels together in a .npz / .pt / .safetensors file)")
        else:
            lab = _pick(main, kf["labels"], features, "FEATURES", True)
            files["labels"] = f"{features}['{kf['labels']}']"
        W_src = from_option(weights, "weights", "--weights") if weights is not None else \
            (None if single else main.get(kf["weights"]))
        b_src = from_option(bias, "bias", "--bias") if bias is not None else \
            (None if single else main.get(kf["bias"]))
        if (keys or {}).get("weights") and W_src is None and not single:
            raise InputError(f"--weights-key: {features} has no array '{kf['weights']}'")
        if W_src is not None and "weights" not in files:
            files["weights"] = f"{features}['{kf['weights']}']"
        if b_src is not None and "bias" not in files:
            files["bias"] = f"{features}['{kf['bias']}']"

        _numeric(feat, "FEATURES")
        if len(feat.shape) != 2:
            hint = " (flatten each sample: reshape to N x d)" if len(feat.shape) > 2 else ""
            raise InputError(f"{_named('FEATURES', feat)} must be 2-dimensional (N x d), got shape {feat.shape}{hint}")
        if lab.kind() not in "fiu" or lab.dtype == np.dtype(bool):
            raise InputError(f"--labels: {lab.name} must hold integer class labels, got dtype {lab.dtype}")
        if len(lab.shape) != 1:
            hint = " (save labels.ravel())" if len(lab.shape) == 2 and 1 in lab.shape else ""
            raise InputError(f"--labels: {lab.name} must be 1-dimensional (one label per sample), got shape "
                             f"{lab.shape}{hint}")
        n_lab = lab.shape[0]
        if n_lab == 0:
            raise InputError(f"--labels: {lab.name} is empty (no samples)")
        lay, why = detect_layout(feat.shape, n_lab, layout)
        N, d = (feat.shape if lay == "nd" else feat.shape[::-1])
        if d == 0:
            raise InputError(f"{_named('FEATURES', feat)} has dimension d = 0")
        W = b = None
        if W_src is not None:
            _numeric(W_src, "--weights")
            if len(W_src.shape) != 2:
                raise InputError(f"--weights: {W_src.name} must be K x d (2-dimensional), got shape {W_src.shape}")
            if W_src.shape[1] != d:
                hint = " (it looks like W^T, d x K: transpose it)" if W_src.shape[0] == d else ""
                raise InputError(f"--weights: {W_src.name} must be K x d with d = {d} (one row per class), got shape "
                                 f"{W_src.shape}{hint}")
            if W_src.shape[0] == 0:
                raise InputError(f"--weights: {W_src.name} has no rows (shape {W_src.shape}): W must be K x d with K >= 1")
            MT.check_state_budget(W_src.shape[0], d, weights=True, what="--weights")
            W = np.asarray(W_src.read_all(), dtype=np.float64)
            if not np.isfinite(W).all():
                raise InputError(f"--weights: {W_src.name} must contain only finite numbers (found NaN or inf)")
        if b_src is not None:
            if W is None:
                raise InputError("--bias: a bias is given without weights: the bias enters only NC4, which needs W")
            _numeric(b_src, "--bias")
            if b_src.shape != (W.shape[0],):
                raise InputError(f"--bias: {b_src.name} must have K = {W.shape[0]} entries (one per row of W), got "
                                 f"shape {b_src.shape}")
            b = np.asarray(b_src.read_all(), dtype=np.float64)
            if not np.isfinite(b).all():
                raise InputError(f"--bias: {b_src.name} must contain only finite numbers (found NaN or inf)")
        return Inputs(feat, lab, W, b, lay, int(N), int(d), why, files, srcs)
    except BaseException:
        for s in srcs:
            s.close()
        raise


def _label_chunks(inp: Inputs, step: int):
    for s in range(0, inp.N, step):
        yield s, min(inp.N, s + step)


def scan_labels(inp: Inputs, step: int) -> np.ndarray:
    """Counts per class from a streaming pass over the labels (checks integers, >= 0, no empty class,
    < K = rows of W) before any feature is read."""
    name = inp.labels.name
    hi = -1
    counts = np.zeros(0, dtype=np.int64)
    K_w = None if inp.weights is None else inp.weights.shape[0]
    for s, e in _label_chunks(inp, step):
        raw = inp.labels.read(s, e, 0)
        y = MT._labels_chunk(raw, e - s, K_w, f"{_named('--labels', name)}: ", False, None)
        if y.size:
            m = int(y.max())
            if m >= inp.N:
                raise InputError(f"{_named('--labels', name)}: label {m} is >= N = {inp.N}: some class 0..{m} has no sample "
                                 "(labels must be class indices 0..K-1 with every class present)")
            if m > hi:
                hi = m
                grown = np.zeros(hi + 1, dtype=np.int64)
                grown[: counts.size] = counts
                counts = grown
            counts += np.bincount(y, minlength=counts.size)
    K = counts.size if K_w is None else K_w
    if counts.size < K:
        counts = np.concatenate([counts, np.zeros(K - counts.size, dtype=np.int64)])
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        src = f" (W has K = {K} rows)" if K_w is not None else ""
        raise InputError(f"{_named('--labels', name)}: class {int(empty[0])} has no sample{src}; every class 0..{K - 1} needs "
                         "at least one sample")
    return counts


# ---------------------------------------------------------------------------------------------
# Predictions (the certified optimum of the matching model)
# ---------------------------------------------------------------------------------------------

def _resolve_predict(predict, lw, lh, tau) -> str | None:
    given_ufm = lw is not None or lh is not None
    if predict is None:
        for opt, v in (("--lambda-w", lw), ("--lambda-h", lh), ("--tau", tau)):
            if v is not None:
                raise InputError(f"{opt} is given without --predict (name the model: --predict ufm-ce, ufm-mse or scl)")
        return None
    if predict not in PREDICT:
        raise InputError(f"--predict must be one of {', '.join(PREDICT)}, got {predict!r}")
    if given_ufm and tau is not None:
        raise InputError("--tau and --lambda-w/--lambda-h are given together: --tau belongs to --predict scl, the "
                         "lambdas to --predict ufm-ce/ufm-mse")
    if predict == "auto":
        if tau is not None:
            return "scl"
        if given_ufm:
            return "ufm-ce"
        raise InputError("--predict auto needs --tau (SCL) or --lambda-w and --lambda-h (UFM, cross-entropy; name "
                         "--predict ufm-mse for the squared loss)")
    if predict.startswith("ufm"):
        if tau is not None:
            raise InputError(f"--tau does not apply to --predict {predict} (it needs --lambda-w and --lambda-h)")
        if lw is None or lh is None:
            raise InputError(f"--predict {predict} needs --lambda-w and --lambda-h (the UFM weight decays)")
    if predict == "scl" and tau is None:
        raise InputError("--predict scl needs --tau (the temperature)")
    if predict == "scl" and given_ufm:
        raise InputError("--lambda-w/--lambda-h do not apply to --predict scl (it needs --tau)")
    return predict


def validate_prediction_options(predict, lw, lh, tau) -> tuple[str | None, dict]:
    """Check the prediction options before any work (InputError naming the option)."""
    model = _resolve_predict(predict, lw, lh, tau)
    params = {}
    if model is not None and model.startswith("ufm"):
        from theory.ufm import LAMBDA_MAX, LAMBDA_MIN

        for opt, v in (("--lambda-w", lw), ("--lambda-h", lh)):
            x = as_float(opt, v, positive=True)
            if not LAMBDA_MIN <= x <= LAMBDA_MAX:
                raise InputError(f"{opt} must be in [{LAMBDA_MIN:g}, {LAMBDA_MAX:g}] (docs/ufm.md), got {x:g}")
            params["lambda_w" if opt == "--lambda-w" else "lambda_h"] = x
    if model == "scl":
        from theory.scl import validate_tau

        try:
            params["tau"] = validate_tau(tau)
        except InputError as exc:
            raise InputError(f"--tau: {exc}") from None
    return model, params


def predict_geometry(model: str | None, params: dict, counts: np.ndarray, d: int, min_entry: float) -> dict:
    """The prediction for the data's class counts: {"gram": PredictedGram | None, "reason", "record"}."""
    if model is None:
        return {"gram": None, "reason": "no prediction requested (--predict)", "record": None}
    K = int(counts.size)
    balanced = bool(np.all(counts == counts[0]))
    rec: dict = {"model": model, "parameters": dict(params), "classes": K, "dim": d,
                 "balanced": balanced, "counts_range": [int(counts.min()), int(counts.max())]}
    if K < 2:
        return _no_prediction(rec, "a single class (K = 1): no model prediction of a class-mean geometry")
    if model.startswith("ufm"):
        return _predict_ufm(model, params, counts, d, rec)
    return _predict_scl(params, counts, d, min_entry, rec)


def _no_prediction(rec: dict, reason: str) -> dict:
    rec.update({"geometry": None, "reason": reason})
    return {"gram": None, "reason": f"prediction unavailable: {reason}", "record": rec}


def _predict_ufm(model: str, params: dict, counts: np.ndarray, d: int, rec: dict) -> dict:
    from theory import ufm as TU

    K = int(counts.size)
    loss = model.split("-")[1]
    rec["source"] = ("Zhu et al., NeurIPS 2021, Thm 3.1 (UFM, CE); docs/ufm.md" if loss == "ce" else
                     "Zhou et al., ICML 2022; Han, Papyan & Donoho, ICLR 2022 (UFM, MSE); docs/ufm.md")
    rec["convention"] = ("f = (1/N) sum_i loss(W h_i + b, y_i) + lambda_w/2 ||W||^2 + lambda_h/2 ||H||^2 (docs/ufm.md): "
                         "lambda_h penalises the features themselves")
    if not bool(np.all(counts == counts[0])):
        return _predict_ufm_imbalanced(loss, params, counts, d, rec)
    n = int(counts[0])
    inst = TU.UFMInstance(loss, K, n, d, params["lambda_w"], params["lambda_h"])
    failed = inst.hypotheses()
    rec["instance"] = inst.to_dict()
    if failed:
        return _no_prediction(rec, "; ".join(failed))
    pred = TU.optimum(inst)
    rec.update({"value": pred.value, "trivial": pred.trivial, "geometry": pred.geometry,
                "threshold": ({"s": TU.ce_threshold(inst), "trivial_when_s_at_least": 1.0 / K} if loss == "ce" else
                              {"sqrt_n": math.sqrt(n), "N_lambda": inst.N * inst.lam})})
    if not pred.trivial:
        # closed-form class means: beta U with U^T U = J_K (theory.ufm.optimal_point): norm beta sqrt((K-1)/K)
        W, Mu, _ = TU.optimal_class_point(inst)
        norms = np.linalg.norm(Mu - Mu.mean(axis=1, keepdims=True), axis=0)
        rec["predicted_mean_norm"] = float(norms.mean())
        rec["predicted_classifier_norm"] = float(np.linalg.norm(W, axis=1).mean())
    rec["certificate"] = _ufm_certificate(inst)
    if pred.trivial:
        return {"gram": None, "reason": ("the predicted optimum is W = H = 0 (trivial phase: the class means are zero, "
                                         "their Gram has no direction)"), "record": rec}
    return {"gram": MT.PredictedGram("simplex-etf (UFM closed form)", 1.0, None), "reason": None, "record": rec}


#: Largest K for which measure runs the any-loss engine's certificate for imbalanced counts (its geometry report
#: holds the K x K cosines up to 100 classes; `ncproofs solve ufm --counts` runs larger instances on its own).
UFM_IMBALANCED_MAX_K = 100


def _predict_ufm_imbalanced(loss: str, params: dict, counts: np.ndarray, d: int, rec: dict) -> dict:
    """The imbalanced UFM optimum from the any-loss engine (solvers.ufm_general + its certificate,
    proofs_check.claims.ufm.check_general, as `ncproofs solve ufm --counts`)."""
    K = int(counts.size)
    rec["source"] = ("the any-loss engine: proofs_check.claims.ufm.check_general (docs/ufm_general.md; imbalanced "
                     "UFM: Fang et al., PNAS 2021, minority collapse)")
    cmd = (f"ncproofs solve ufm --loss {loss} --counts {','.join(map(str, counts.tolist()))} --dim {d} "
           f"--lambda-w {params['lambda_w']:g} --lambda-h {params['lambda_h']:g}")
    rec["command"] = cmd if K <= 50 else f"ncproofs solve ufm --loss {loss} --counts N1,...,N{K} --dim {d} ..."
    if K > UFM_IMBALANCED_MAX_K:
        return _no_prediction(rec, f"imbalanced classes with K = {K} > {UFM_IMBALANCED_MAX_K}: measure runs the "
                                   "any-loss engine's certificate up to 100 classes; run `ncproofs solve ufm --counts "
                                   "...` for this instance")
    from proofs_check.claims.ufm import check_general
    from solvers import losses as L
    from solvers import ufm_general as SG

    p = SG.classification(L.make_loss(loss, K), [int(c) for c in counts], d, params["lambda_w"], params["lambda_h"])
    rep = check_general(p, starts=1, seed=0).to_dict()
    cert = rep.get("certificate") or {}
    geo = rep.get("geometry") or {}
    stm = {c["id"]: c["verdict"] for c in rep.get("claims", [])}
    rec.update({"value": cert.get("upper"), "trivial": False,
                "certificate": {"run": True, "verdict_of_the_model_check": rep["verdict"], "reason": rep["reason"],
                                "method": cert.get("method"), "lower_bound": cert.get("lower_bound"),
                                "gap": cert.get("gap"), "statements": stm,
                                "how": "proofs_check.claims.ufm.check_general at the data's counts, d and lambdas"}})
    norms, cos = geo.get("class_mean_norms"), geo.get("class_mean_cosines")
    if stm.get("minimiser-unique") != "VERIFIED":
        return _no_prediction(rec, "the any-loss engine did not certify a unique minimiser for these counts "
                                   f"({rep['verdict']}: {rep['reason']}): a certified value does not certify a point")
    if norms is None or cos is None:
        return _no_prediction(rec, "the engine's geometry report has no class-mean Gram for this K")
    nr = np.asarray(norms, dtype=np.float64)
    P = np.asarray(cos, dtype=np.float64) * np.outer(nr, nr)
    if not np.linalg.norm(P) > 0:
        return {"gram": None, "reason": "the predicted optimum has zero class means (trivial phase): no direction",
                "record": dict(rec, geometry=None, trivial=True)}
    rec.update({"geometry": "imbalanced UFM minimiser (certified unique)", "predicted_mean_norm": float(nr.mean()),
                "predicted_centred_gram": P.tolist(),
                "minority": geo.get("minority")})
    return {"gram": MT.PredictedGram("imbalanced UFM minimiser", matrix=P), "reason": None, "record": rec}


def _network_objective(model, params, record, sc, acc, inp, one: bool) -> dict | None:
    """The network's own UFM objective f(W, H, b) and its gap to the certified optimum (docs/measure.md)."""
    if model is None or not model.startswith("ufm"):
        return None
    loss = model.split("-")[1]
    out = {"loss": loss, "convention": ("f = (1/N) sum_i CE(W h_i + b, y_i) + lambda_w/2 ||W||^2 + lambda_h/2 "
                                        "sum_i ||h_i||^2" if loss == "ce" else
                                        "f = 1/(2N) sum_i ||W h_i + b - e_{y_i}||^2 + lambda_w/2 ||W||^2 + "
                                        "lambda_h/2 sum_i ||h_i||^2")}
    if inp.weights is None:
        return dict(out, value=None, reason="needs the classifier W (--weights or the file key 'weights')")
    if not one or sc is None or getattr(sc, "loss", None) is None:
        return dict(out, value=None, reason="computed on the one-pass route only (not with --passes 2, torch or float32)")
    N = acc.N
    f = sc.loss_sum / N + 0.5 * params["lambda_w"] * float(np.sum(inp.weights ** 2)) + 0.5 * params["lambda_h"] * acc.sq_sum
    out["value"] = f
    fstar = None if record is None else record.get("value")
    cert = (record or {}).get("certificate") or {}
    lb = cert.get("lower_bound")
    out["certified_optimum"] = fstar
    out["certified_lower_bound"] = lb
    if fstar is not None:
        out["gap"] = f - fstar
        out["relative_gap"] = (f - fstar) / abs(fstar) if fstar else None
    if lb is not None and f < lb - 1e-9 * max(1.0, abs(lb)):
        out["note"] = ("below the certified lower bound: the network's objective does not match the model's convention "
                       "(is the feature penalty per sample? docs/ufm.md)")
    return out


def _ufm_certificate(inst) -> dict:
    if inst.k > UFM_CERTIFICATE_MAX_K:
        return {"run": False, "reason": f"K = {inst.k} > {UFM_CERTIFICATE_MAX_K}: the O(K^3) class-reduced "
                                        f"certificate is not run here; `ncproofs solve ufm-{inst.loss}` runs it"}
    from proofs_check.claims import ufm as CU

    rep = CU.check_instance(inst, method="closed-form").to_dict()
    cert = rep.get("certificate") or {}
    return {"run": True, "verdict_of_the_model_check": rep["verdict"], "reason": rep["reason"],
            "method": cert.get("method"), "lower_bound": cert.get("lower_bound"), "gap": cert.get("gap"),
            "statements": {c["id"]: c["verdict"] for c in rep["claims"]},
            "how": "proofs_check.claims.ufm.check_instance(method='closed-form') at the data's K, n, d and lambdas "
                   "(docs/ufm.md 'Uniqueness')"}


def _predict_scl(params: dict, counts: np.ndarray, d: int, min_entry: float, rec: dict) -> dict:
    from theory import scl as TS

    K = int(counts.size)
    tau = params["tau"]
    nonneg = bool(min_entry >= 0.0)
    rec["nonnegative_features"] = nonneg
    rec["convention"] = "unit-norm features, logits h.h'/tau, full batch (docs/scl.md)"
    if nonneg:
        rec["source"] = "Kini et al., ICLR 2024, Thm 1 (UFM+, reconstructed); docs/scl.md"
        rec["model"] = "scl (UFM+: nonnegative features, e.g. after a ReLU)"
        if int(counts.min()) < 2:
            return _no_prediction(rec, "a class with a single sample: the UFM+ minimiser then shares directions "
                                       "between singleton classes (docs/scl.md); no class-mean prediction is made")
        if d < K:
            return _no_prediction(rec, f"d >= K (room for an orthogonal frame): d = {d} < K = {K}")
        rec.update({"geometry": "orthogonal-frame", "value": TS.theorem1_bound(tuple(int(c) for c in counts), tau)
                    if int(counts.sum()) <= TS.MAX_SAMPLES else None,
                    "certificate": {"run": False, "reason": "the collapsed orthogonal frame attains the Theorem 1 lower "
                                    "bound (equal closed forms); the uniqueness certificate of `ncproofs solve scl` "
                                    "needs the N x N Gram and is not run by measure"}})
        return {"gram": MT.PredictedGram("orthogonal frame (centred: J_K)", 1.0, None), "reason": None, "record": rec,
                "compare": "gram_distance_of"}
    rec["source"] = "Graf et al., ICML 2021 (balanced SCL, simplex ETF); docs/scl.md"
    rec["model"] = "scl (unit sphere, features with negative entries)"
    if not bool(np.all(counts == counts[0])):
        return _no_prediction(rec, f"imbalanced classes (counts {int(counts.min())}..{int(counts.max())}) with "
                                   "features of both signs: the SCL optimum on the sphere is not available in this "
                                   "repository for imbalanced classes")
    if int(counts[0]) < 2:
        return _no_prediction(rec, "one sample per class: the SCL loss has no positive pairs")
    if d < K - 1:
        return _no_prediction(rec, f"d >= K-1 (room for a simplex ETF): d = {d} < K-1 = {K - 1}")
    rec.update({"geometry": "simplex-etf", "value": TS.graf_balanced_value(K, int(counts[0]), tau),
                "certificate": {"run": False, "reason": "Graf et al.'s value; the geometry certificate of `ncproofs "
                                "solve scl` needs the N x N Gram and is not run by measure"}})
    return {"gram": MT.PredictedGram("simplex-etf (SCL)", 1.0, None), "reason": None, "record": rec}


# ---------------------------------------------------------------------------------------------
# Graded labels
# ---------------------------------------------------------------------------------------------

def grade(distance: float | None) -> str | None:
    if distance is None or not math.isfinite(distance):
        return None
    for limit, word in GRADES:
        if distance <= limit:
            return word
    return "far from"  # pragma: no cover


def geometry_fit(K: int, d: int) -> dict:
    """Whether a simplex ETF (needs d >= K - 1) and an orthogonal frame (d >= K) fit in R^d, and when not, the
    smallest normalised Gram distance any configuration of K means in R^d can have (docs/metrics.md)."""
    out = {}
    for name, need, dim in (("simplex_etf", K - 1, K - 1), ("orthogonal_frame", K, K)):
        fits = d >= need
        out[name] = {"fits": fits, "needs_d": need,
                     "min_distance": 0.0 if fits or dim < 1 else math.sqrt(max(2.0 - 2.0 * math.sqrt(d / dim), 0.0))}
    return out


def _fit_note(name: str, K: int, d: int) -> str:
    g = geometry_fit(K, d)[name]
    if g["fits"]:
        return ""
    what = "simplex-ETF" if name == "simplex_etf" else "orthogonal-frame"
    return (f" ({K} {what} vectors need d >= {g['needs_d']}, d = {d}: the geometry cannot fit; no {K} means in "
            f"R^{d} are closer than {g['min_distance']:.3g})")


def graded_labels(metrics: dict, prediction: dict | None, K: int | None = None, d: int | None = None) -> list[str]:
    out = []
    for key, name, fit in (("gram_distance_etf", "simplex ETF", "simplex_etf"),
                           ("gram_distance_of", "orthogonal frame", "orthogonal_frame")):
        v = metrics.get(key)
        if v is not None:
            note = _fit_note(fit, K, d) if K is not None and d is not None and K >= 2 else ""
            out.append(f"{grade(v)} {name}: Gram distance {v:.3g}{note}")
    if prediction and prediction.get("geometry"):
        key = prediction.get("compare_key", "gram_distance_predicted")
        v = metrics.get(key)
        if v is not None:
            out.append(f"{grade(v)} the predicted {prediction['geometry']} ({prediction['model']}): Gram distance "
                       f"{v:.3g} ({key})")
    return out


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
    if passes not in ("auto", 1, 2, "1", "2"):
        raise InputError(f"--passes must be auto, 1 or 2, got {passes!r}")
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
        est = MT.estimate_seconds(N, d, K, weights=inp.weights is not None)
        if time_limit is not None and est["total_s"] > time_limit:
            raise InputError(f"FEATURES: N = {N}, d = {d}, K = {K}: estimated ~{est['total_s']:.0f} s on 2 cores "
                             f"(two passes ~{est['passes_s']:.0f} s, K x K class pairs ~{est['pairs_s']:.0f} s), above "
                             f"the time limit of {time_limit:g} s; raise it with --time-limit")
        axis = 0 if inp.layout == "nd" else 1

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

        t1 = time.perf_counter()
        where = f"{_named('FEATURES', inp.features)}: "
        nworkers = _workers(workers)
        while nworkers > 1 and not MT.one_pass_fits(d, copies=nworkers + 1, K=K):
            nworkers -= 1  # fewer live accumulators before giving up the one-pass route
        one = (dev is None and dtype == "float64" and passes != 2 and MT.one_pass_fits(d, copies=nworkers + 1, K=K))
        if passes == 1 and not one:
            raise InputError("--passes 1 needs the CPU (numpy), float64 accumulation and a d x d scatter that fits "
                             f"in memory (d = {d}); use --passes auto")
        c0 = time.process_time()
        if one:
            ostep = int(batch_size) if batch_size is not None else one_pass_chunk_rows(d)
            ostep = max(1, min(ostep, N))
            step = ostep
            prog = Progress(N * (2 if inp.weights is not None else 1), enabled=progress)
            reader = _reader(inp, axis, prog)
            with _single_threaded_blas():
                prog.stage("pass 1 (sums and scatter)")
                acc = _one_pass(reader, N, K, d, ostep, nworkers, where)
                t2 = time.perf_counter()
                sc = None
                if inp.weights is not None:
                    prog.stage("pass 2 (NC4)")
                    sc = _nc4_pass(reader, N, acc, inp.weights, inp.bias, ostep, nworkers,
                                   loss=model.split("-")[1] if (model or "").startswith("ufm") else None)
            prog.done()
            route = ("one pass (shifted sums and d x d scatter, compensated)" +
                     ("; a second pass for NC4 (it needs the final class means)" if sc is not None else ""))
        else:
            import contextlib

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
        ood_mean = _ood_mean(ood, d, (keys or {}).get("features") or ood_key, diagnostics) if ood is not None else None
        pred = predict_geometry(model, params, counts, d, acc.min_value)
        objective = _network_objective(model, params, pred["record"], sc, acc, inp, one)
        res = MT.collapse_metrics(acc, sc, predicted=pred["gram"], predicted_reason=pred["reason"], ood_mean=ood_mean)
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
            out["_centred_means"] = (acc.numpy_state()["Mr"] if one else sc.numpy_state()["Mr"])
        return out
    finally:
        inp.close()



# ---------------------------------------------------------------------------------------------
# One pass (docs/measure.md, "One pass"): shifted sums and scatter, segments on worker threads
# ---------------------------------------------------------------------------------------------

#: Bytes of float64 shifted rows per chunk of the one-pass route: measured on the 2-core VM (d = 512,
#: K = 10 and 1000, single-threaded BLAS, CPU time per MB): chunks of 1024-4096 rows (4-16 MB, the
#: size of the shared L3 cache) are within 10% of each other and best; 512 rows lose 10-20% to the
#: per-call overheads, 16384 rows (64 MB) lose 25-30% to memory traffic (docs/benchmarks.md).
ONE_PASS_CHUNK_BYTES = 1 << 23

#: Rows per segment: the unit of work of a worker thread. Fixed (a multiple of the chunk), so the
#: order of every floating-point sum, hence every number, is the same for any number of workers.
SEGMENT_CHUNKS = 16


def one_pass_chunk_rows(d: int) -> int:
    return max(256, int(ONE_PASS_CHUNK_BYTES // (8 * max(d, 1))))


def _workers(workers) -> int:
    if workers is not None:
        return int(workers)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def _two_pass_reason(dev, dtype, d, nworkers) -> str:
    if dev is not None:
        return "the torch device path accumulates in two passes"
    if dtype != "float64":
        return "float32 accumulation uses the two-pass route"
    return (f"the one-pass accumulators at d = {d} (four d x d and four K x d float64 matrices each, "
            f"{nworkers + 1} of them) do not fit the budget ({MT.ONE_PASS_MAX_SCATTER_BYTES / 1e6:.0f} MB per d x d "
            f"matrix, {MT.ONE_PASS_TOTAL_BYTES / 1e6:.0f} MB in all): the scatter is accumulated about the final "
            "class means in a second pass (N Sigma_W when d <= K, its K x K projection when d > K)")


class _single_threaded_blas:
    """threadpoolctl's limit of 1 BLAS thread around the hot loop (the chunk products are small: threaded
    BLAS on them collapses when the other cores are busy; the workers parallelise over segments instead)."""

    def __enter__(self):
        # threadpoolctl limits the BLAS libraries loaded when the limit is set: scipy's BLAS (a separate
        # OpenBLAS from numpy's) is loaded first, else its syrk would still run on every core
        import scipy.linalg.blas  # noqa: F401
        import scipy.sparse  # noqa: F401

        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn / the [measure] extra
            self.ctx = None
            return self
        self.ctx = threadpool_limits(limits=1, user_api="blas")
        self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self.ctx is not None:
            self.ctx.__exit__(*exc)
        return False


def _reader(inp, axis: int, prog=None):
    def read(s: int, e: int):
        X = inp.features.read(s, e, axis)
        if axis == 1:
            X = X.T
        y = inp.labels.read(s, e, 0)
        if prog is not None:
            prog.add(e - s)
        return X, y

    return read


class Progress:
    """One progress line on stderr, rewritten in place (``\\r``) at most every 0.5 s; only when enabled
    (the CLI enables it when stderr is a terminal). Thread-safe (the workers report their chunks)."""

    def __init__(self, total: int, enabled: bool = False, stream=None, every: float = 0.5):
        import threading

        self.total, self.enabled, self.every = max(int(total), 1), bool(enabled), float(every)
        self.stream = stream if stream is not None else sys.stderr
        self.done_rows, self.name, self.t0, self.last = 0, "", time.perf_counter(), 0.0
        self.lock = threading.Lock()
        self.shown = False

    def stage(self, name: str) -> None:
        self.name = name
        self._show(force=True)

    def add(self, rows: int) -> None:
        with self.lock:
            self.done_rows += int(rows)
        self._show()

    def _show(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.every:
            return
        self.last = now
        frac = min(1.0, self.done_rows / self.total)
        el = now - self.t0
        eta = f", ~{el * (1 - frac) / frac:.0f} s left" if frac > 0.02 else ""
        self.stream.write(f"\rncproofs measure: {self.name}: {100 * frac:5.1f}% of the samples read, {el:.0f} s{eta}   ")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.enabled and self.shown:
            self._show(force=True)
            self.stream.write("\n")
            self.stream.flush()


def _segments(start: int, N: int, step: int):
    seg = step * SEGMENT_CHUNKS
    return [(s, min(N, s + seg)) for s in range(start, N, seg)]


def _in_order(fn, items, nworkers: int):
    """fn(item) for every item, results yielded in order, at most nworkers + 1 in flight."""
    if nworkers <= 1 or len(items) <= 1:
        for it in items:
            yield fn(it)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=nworkers) as ex:
        pending = deque()
        it = iter(items)
        for x in it:
            pending.append(ex.submit(fn, x))
            if len(pending) > nworkers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _one_pass(reader, N: int, K: int, d: int, step: int, nworkers: int, where: str) -> "MT.ClassStats":
    """The one-pass statistics of rows [0, N). The shifts are fixed by a sequential prefix (chunks are read
    in order until every class has a shift: the class's mean in the first chunk where it appears); the
    rest is cut into fixed segments, accumulated about the same shifts on worker threads and added in
    segment order (so the numbers do not depend on the number of workers)."""
    total = MT.ClassStats(K, d, where=where)
    pos = 0
    while pos < N and not total.has_shift.all():
        e = min(N, pos + step)
        X, y = reader(pos, e)
        total.update(X, y)
        pos = e
    if pos >= N:
        return total
    shift = total.shift

    def work(seg):
        acc = MT.ClassStats(K, d, shift=shift, where=where)
        for s in range(seg[0], seg[1], step):
            X, y = reader(s, min(seg[1], s + step))
            acc.update(X, y)
        return acc

    for acc in _in_order(work, _segments(pos, N, step), nworkers):
        total.merge(acc)
    return total


def _nc4_pass(reader, N: int, stats, weights, bias, step: int, nworkers: int, loss: str | None = None):
    total = MT.NC4Pass(stats, weights, bias, loss=loss)

    def work(seg):
        acc = MT.NC4Pass.__new__(MT.NC4Pass)
        acc.__dict__.update(total.__dict__)
        acc.N = acc.disagree = 0
        acc.loss_sum = 0.0
        for s in range(seg[0], seg[1], step):
            X, y = reader(s, min(seg[1], s + step))
            acc.update(X, y)
        return acc

    for acc in _in_order(work, _segments(0, N, step), nworkers):
        total.merge(acc)
    return total


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
