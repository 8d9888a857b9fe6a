"""Backend selection (numpy default; torch optional) with clear fallbacks.

``resolve(backend, device, dtype)`` returns the backend actually used and a list of messages
saying why it differs from the request (torch not installed, CUDA not available). Nothing in
the default install needs torch or a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from theory._validate import InputError

BACKENDS = ("numpy", "torch")
DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class BackendChoice:
    backend: str
    device: str
    dtype: str
    messages: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return {"backend": self.backend, "device": self.device, "dtype": self.dtype,
                "fallback": list(self.messages) or None}


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


def resolve(backend: str = "numpy", device: str | None = None, dtype: str = "float64") -> BackendChoice:
    if backend not in BACKENDS:
        raise InputError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if dtype not in DTYPES:
        raise InputError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if device not in (None, "cpu", "cuda") and not (str(device).startswith("cuda:") and str(device)[5:].isdigit()):
        raise InputError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    msgs: list[str] = []
    if backend == "numpy":
        if device not in (None, "cpu"):
            raise InputError(f"--device {device!r} needs --backend torch (the numpy backend runs on the CPU)")
        if dtype != "float64":
            raise InputError("--dtype: the numpy backend runs in float64 only (use --backend torch for float32)")
        return BackendChoice("numpy", "cpu", "float64")
    if not torch_available():
        msgs.append("torch is not installed (pip install 'ncproofs[torch]'); falling back to the numpy backend in float64")
        return BackendChoice("numpy", "cpu", "float64", tuple(msgs))
    import torch

    dev = device or "cpu"
    if dev.startswith("cuda") and not torch.cuda.is_available():
        msgs.append("CUDA is not available to torch on this machine; falling back to device cpu")
        dev = "cpu"
    return BackendChoice("torch", dev, dtype, tuple(msgs))
