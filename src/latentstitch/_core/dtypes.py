"""The array types and dtypes latentstitch computes in: the lowest layer, imported by every other core module."""

from __future__ import annotations

import numpy as np
import torch

#: What every public function accepts and returns: a numpy array or a torch tensor.
ArrayLike = np.ndarray | torch.Tensor

#: The torch dtypes latentstitch computes in.
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def is_floating(dtype: object) -> bool:
    """Whether a torch or numpy dtype is a floating-point one."""
    if isinstance(dtype, torch.dtype):
        return dtype.is_floating_point
    return np.dtype(dtype).kind == "f"
