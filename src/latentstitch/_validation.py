"""Shared input checking and numpy/torch conversion.

Every public function of latentstitch accepts numpy arrays or torch tensors and returns the type it was given.
The math is written once, in torch: numpy inputs are viewed as tensors without a copy (``torch.from_numpy``), and
results are handed back as numpy arrays of the same dtype. This module is the one place that does the conversion and
the checks, so that every error names the argument at fault and says what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

ArrayLike = np.ndarray | torch.Tensor

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def is_tensor(x: object) -> bool:
    return isinstance(x, torch.Tensor)


def as_float_tensor(
    x: object,
    name: str,
    *,
    ndim: int | Sequence[int] | None = None,
    min_rows: int | None = None,
    finite: bool = True,
) -> torch.Tensor:
    """View ``x`` as a floating-point torch tensor, checking type, dtype, rank, size and finiteness.

    Numpy arrays are shared with the returned tensor, not copied. ``name`` is the argument name used in errors.
    """
    if isinstance(x, np.ndarray):
        if x.dtype.kind != "f":
            raise TypeError(
                f"{name}: expected a floating-point array, got dtype {x.dtype}; convert it first, "
                f"for example {name}.astype(np.float32)"
            )
        if any(s < 0 for s in x.strides):
            x = np.ascontiguousarray(x)
        t = torch.from_numpy(x)
    elif isinstance(x, torch.Tensor):
        if x.dtype not in _FLOAT_DTYPES:
            raise TypeError(
                f"{name}: expected a floating-point tensor, got dtype {x.dtype}; convert it first, "
                f"for example {name}.float()"
            )
        t = x
    else:
        raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if t.ndim not in allowed:
            want = " or ".join(f"{d}-D" for d in allowed)
            raise ValueError(f"{name}: expected a {want} array, got shape {tuple(t.shape)}")
    if min_rows is not None and (t.ndim == 0 or t.shape[0] < min_rows):
        got = 0 if t.ndim == 0 else t.shape[0]
        raise ValueError(f"{name}: expected at least {min_rows} rows (samples), got {got}")
    if finite:
        check_finite(t, name)
    return t


def check_finite(t: torch.Tensor, name: str, *, row_offset: int = 0) -> None:
    """Raise a ValueError naming ``name`` and the first row holding NaN or inf."""
    # Fast path: any NaN or inf makes the sum non-finite, and a sum is one vectorised pass (torch.isfinite on
    # CPU is ~40x slower). A non-finite sum of finite values (overflow) falls through to the exact check.
    if t.numel() == 0 or bool(torch.isfinite(t.sum())):
        return
    ok = torch.isfinite(t)
    if bool(ok.all()):
        return
    bad = (~ok).reshape(t.shape[0], -1).any(dim=1).nonzero()[0, 0].item() if t.ndim > 0 else 0
    raise ValueError(f"{name}: contains NaN or inf (first at row {bad + row_offset})")


def check_same_width(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of features (last dimension): "
            f"got {a.shape[-1]} and {b.shape[-1]}"
        )


def check_same_rows(a: torch.Tensor, b: torch.Tensor, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of samples (rows): got {a.shape[0]} and {b.shape[0]}"
        )


def match_reference(t: torch.Tensor, reference: torch.Tensor, name: str, reference_name: str) -> torch.Tensor:
    """Bring ``t`` to ``reference``'s dtype and device.

    Two torch tensors on different devices are an error (moving data between devices silently is a performance
    trap); a numpy-born tensor (always on the CPU) is moved to the reference's device.
    """
    if t.device != reference.device and t.device.type != "cpu":
        raise ValueError(
            f"{name} is on device {t.device} but {reference_name} is on {reference.device}; "
            "move them to the same device"
        )
    return t.to(device=reference.device, dtype=reference.dtype)


def wrap_like(result: torch.Tensor, like: object) -> ArrayLike:
    """Return ``result`` as the type of ``like``: numpy in, numpy out (same dtype); torch stays torch."""
    if isinstance(like, np.ndarray):
        out = result.detach().cpu()
        if out.dtype == torch.bfloat16:
            out = out.float()
        return out.numpy()
    return result


def to_numpy(x: object, name: str) -> np.ndarray:
    """A numpy view or copy of an array-like (for code paths that call numpy/scikit-learn)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            x = x.float()
        return x.numpy()
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{name}: expected a numpy array or a torch tensor, got {type(x).__name__}")


def check_positive_int(value: object, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value}")
    return int(value)


def check_bool(value: object, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_nonnegative(value: object, name: str) -> float:
    """A finite real number >= 0 (regularisation strengths, tolerances)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"{name}: expected a finite number >= 0, got {value}")
    return float(value)


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value  # type: ignore[return-value]


def channels_as_rows(x: torch.Tensor, name: str) -> torch.Tensor:
    """Activations as rows of features, for per-feature matching (Dr. Frankenstein's convention).

    (N, C, H, W) feature maps become (N*H*W, C): every spatial position is a sample of the C channels, as a 1x1
    convolution sees them. (N, T, D) token sequences become (N*T, D). (N, D) is returned unchanged.
    """
    if x.ndim == 2:
        return x
    if x.ndim == 3:
        return x.reshape(-1, x.shape[-1])
    if x.ndim == 4:
        return x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])
    raise ValueError(f"{name}: expected (N, D), (N, T, D) or (N, C, H, W) activations, got shape {tuple(x.shape)}")


def flatten_samples(x: torch.Tensor) -> torch.Tensor:
    """Activations as one row per sample: (N, ...) -> (N, prod(...)), the convention of CKA and CCA."""
    return x.reshape(x.shape[0], -1)


def check_positive(value: object, name: str) -> float:
    """A finite real number > 0 (exponents, scales, temperatures)."""
    number = check_nonnegative(value, name)
    if number == 0:
        raise ValueError(f"{name}: expected a finite number > 0, got {value}")
    return number
