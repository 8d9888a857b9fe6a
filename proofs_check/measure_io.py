"""Reading ``ncproofs measure``'s files in chunks: array sources, containers, inputs and layout.

``.npy``, ``.safetensors`` and uncompressed ``.npz`` members are read with ``os.pread`` at byte
offsets, chunk by chunk (never memory-mapped); a compressed ``.npz`` member is decompressed as a
stream; a ``.pt`` file is opened with ``torch.load(mmap=True, weights_only=True)``
(docs/measure.md, "Files"). Every name is re-exported by :mod:`proofs_check.measure`.
"""

from __future__ import annotations

import json
import os
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from theory import metrics as MT
from theory._validate import InputError

FORMATS = (".npy", ".npz", ".pt", ".pth", ".safetensors")
LAYOUTS = ("auto", "nd", "dn")


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
        # where each array comes from: a container (keys mean something) or a single-array file (.npy)
        single_file = {k: (features if single else None) for k in ("features", "labels", "weights", "bias")}

        def from_option(path, key, opt):
            arrs = open_arrays(path, opt, diagnostics, wanted)
            srcs.extend(v for v in arrs.values() if isinstance(v, Source))
            files[key] = str(path)
            single_file[key] = path if "__single__" in arrs else None
            return _pick(arrs, kf[key], path, opt, True)

        for key, given in (("labels", labels), ("weights", weights), ("bias", bias)):
            if given is not None and not single and kf[key] in main:  # the option wins; say so (it was silent)
                diagnostics.append(f"--{key} {given}: used instead of the array '{kf[key]}' that {features} also "
                                   f"holds (that array is not read)")
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
        for k, v in (keys or {}).items():  # --labels-key on a .npy file named nothing and was ignored
            if v and single_file.get(k) is not None:
                raise InputError(f"--{k}-key {v!r}: the {k} come from {single_file[k]}, a file holding one array "
                                 f"(no keys); --{k}-key names an array in a .npz / .pt / .safetensors container")
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
        if raw.dtype.kind == "u" and raw.size and int(raw.max()) >= inp.N:  # before the int64 cast wraps 2^63 around
            raise InputError(f"{_named('--labels', name)}: label {int(raw.max())} is >= N = {inp.N}: some class has "
                             "no sample (labels must be class indices 0..K-1 with every class present)")
        y = MT._labels_chunk(raw, e - s, None, f"{_named('--labels', name)}: ", False, None)
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
    if K_w is not None and counts.size > K_w:  # W's row count, not the labels, is what does not match
        raise InputError(f"--weights: W has {K_w} rows (one per class), but {_named('--labels', name)} has class "
                         f"indices 0..{counts.size - 1} (K = {counts.size}); give one row of W per class")
    K = counts.size if K_w is None else K_w
    if counts.size < K:
        counts = np.concatenate([counts, np.zeros(K - counts.size, dtype=np.int64)])
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        src = f" (W has K = {K} rows)" if K_w is not None else ""
        raise InputError(f"{_named('--labels', name)}: class {int(empty[0])} has no sample{src}; every class 0..{K - 1} needs "
                         "at least one sample")
    return counts
