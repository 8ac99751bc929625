"""Errors that name the rows at fault, and the translation of torch's own errors into ones naming the argument.

``RowError`` (and ``NonFiniteError``, ``ZeroNormError``) say which argument and which row; ``model_input_errors``
turns the errors a torch model raises on an unsuitable input into a ``ValueError`` naming that input.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from latentstitch._core.dtypes import is_floating


class RowError(ValueError):
    """An error about one row of an argument (``name``, ``row``).

    Chunked code computes on a part of the input at a time; ``shifted(offset)`` re-creates the error for the row of
    the whole input, so the message a user reads always counts rows of what they passed.
    """

    def __init__(self, name: str, row: int):
        self.name, self.row = name, row
        super().__init__(self.describe())

    def describe(self) -> str:
        return f"{self.name}: row {self.row} is invalid"

    def shifted(self, offset: int) -> RowError:
        return type(self)(self.name, self.row + offset)


class NonFiniteError(RowError):
    """An argument holds NaN or inf."""

    def describe(self) -> str:
        return f"{self.name}: contains NaN or inf (first at row {self.row})"


#: torch's own message when batch normalisation in train mode sees one value per channel.
_BATCHNORM_MESSAGE = "Expected more than 1 value per channel when training"


@contextmanager
def model_input_errors(x: object, name: str, model: str = "the model") -> Iterator[None]:
    """Run a model on the input ``x`` (the argument ``name``), turning torch's errors that are really about the input
    into errors naming it: a one-sample training batch through batch normalisation, and inputs of an integer or
    boolean dtype that the model's floating-point layers cannot take (token ids for an embedding layer are fine:
    nothing is converted, only the error is explained)."""
    try:
        yield
    except ValueError as error:
        if _BATCHNORM_MESSAGE not in str(error):
            raise
        raise ValueError(
            f"{name}: {model} has batch normalisation, which in train mode needs more than one value per channel "
            "(here a batch of one sample); give at least 2 samples or call .eval() to use the running statistics"
        ) from None
    except (RuntimeError, TypeError, NotImplementedError) as error:
        dtype = getattr(x, "dtype", None)
        if not isinstance(x, (torch.Tensor, np.ndarray)) or dtype is None or is_floating(dtype):
            raise
        detail = " ".join(str(error).split())[:200]
        raise TypeError(
            f"{name}: {model} could not run on inputs of dtype {dtype} ({detail}); give floating-point inputs, "
            f"e.g. images as {name}.float() / 255"
        ) from None


class ZeroNormError(RowError):
    """A zero vector was given to a similarity that divides by the norm (cosine, angular)."""

    def describe(self) -> str:
        return (
            f"{self.name}: row {self.row} has zero norm, so its cosine similarity is undefined; remove it, or pass "
            "eps=<small positive number> to map zero vectors to zero similarities"
        )
