"""Array conversion: numpy and torch inputs in, the same type out.

Every public function of latentstitch accepts numpy arrays or torch tensors and returns the type it was given.
The math is written once, in torch: numpy inputs are viewed as tensors without a copy (``torch.from_numpy``), and
results are handed back as numpy arrays of the same dtype (``as_float_tensor``, ``wrap_like``, ``to_numpy``).
Shapes are checked here too (``check_same_width``, ``check_same_rows``, ``match_reference``), and activations of
any rank are reshaped to rows (``channels_as_rows``, ``flatten_samples``).

Array-likes. As in scikit-learn, plain Python lists and tuples of numbers (and any object numpy converts to a
numeric array, e.g. a pandas DataFrame) are accepted wherever an array is: they are converted to a float64 numpy
array, and results come back as numpy arrays. A numpy array or torch tensor of an integer or boolean dtype is
refused with a TypeError asking for an explicit conversion: its dtype is the caller's choice, and converting
integer data silently would hide a decision (uint8 images need a scale, token ids are not coordinates).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from latentstitch._core.device import check_finite
from latentstitch._core.dtypes import FLOAT_DTYPES, ArrayLike


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
        t = tensor_view(x)
    elif isinstance(x, torch.Tensor):
        if x.dtype not in FLOAT_DTYPES:
            raise TypeError(
                f"{name}: expected a floating-point tensor, got dtype {x.dtype}; convert it first, "
                f"for example {name}.float()"
            )
        t = x
    else:
        t = tensor_view(_array_from_array_like(x, name))
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


def tensor_view(array: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy(array)``: the same memory, no copy, also for a read-only array.

    Read-only arrays are common inputs: a file opened with ``np.load(..., mmap_mode="r")`` or ``np.memmap(...,
    mode="r")``, a pandas DataFrame's values (copy-on-write), an array its owner locked. torch has no read-only
    tensors, so ``from_numpy`` warns that writing to the tensor would be undefined behaviour. We keep the view and
    silence that one warning rather than copy: copying would load a memory-mapped file into RAM (the reason to map
    it) and double the memory of every large locked array. It is safe because latentstitch never writes into a
    tensor made from its input: every result is a new tensor, and the one in-place operation on data
    (``CrossMoments``' shift) runs only on a converted copy. Code that wants to write must ``clone()`` first.
    """
    if array.flags.writeable:
        return torch.from_numpy(array)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
        return torch.from_numpy(array)


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
    """Return ``result`` as the type of ``like``: torch stays torch; numpy (or a list, or any other array-like) in,
    numpy out (same dtype)."""
    if not isinstance(like, torch.Tensor):
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
    return _array_from_array_like(x, name)


def _array_from_array_like(x: object, name: str) -> np.ndarray:
    """A float numpy array from a list, tuple or other array-like (scikit-learn's convention: integers and booleans
    become float64); anything else is a TypeError naming the argument."""
    if (
        x is None
        or isinstance(x, (str, bytes, dict, set, frozenset))
        or not (isinstance(x, (list, tuple)) or hasattr(x, "__array__"))
    ):
        raise TypeError(
            f"{name}: expected an array (numpy array, torch tensor, or a list of numbers), got {type(x).__name__}"
        )
    try:
        array = np.asarray(x)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name}: could not be read as a numeric array ({error})") from None
    if array.dtype.kind in "biu":
        array = array.astype(np.float64)
    elif array.dtype.kind != "f":
        raise TypeError(
            f"{name}: expected numbers, got values of dtype {array.dtype} (ragged nested lists, strings or objects?)"
        )
    return array


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
    """Activations as one row per sample: (N, ...) -> (N, prod(...)), the convention of CKA and CCA (N may be 0)."""
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))


def take_rows(value: Any, index: np.ndarray | torch.Tensor) -> Any:
    """``value[index]`` along the first axis for a tensor (index moved to its device) or anything numpy reads."""
    if isinstance(value, torch.Tensor):
        return value[torch.as_tensor(index, device=value.device)]
    return np.asarray(value)[np.asarray(index)]
