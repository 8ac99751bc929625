"""Generalised Procrustes analysis: many spaces aligned to one shared universe, from streamed statistics."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, match_reference, wrap_like
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import Rule, check_bool, check_nonnegative, check_positive_int, rule
from latentstitch._core.persist import Persistable
from latentstitch.alignment._common import orthogonal_factor
from latentstitch.distributed import dask_rows, is_dask_array, reduce_blocks

# Elements of the concatenated rows converted to float64 at a time (as the stitchers' row chunks).
_CHUNK_ELEMENTS = 1 << 21


def _block_moments(block: Any) -> CrossMoments:
    moments = CrossMoments(products=("aa",))
    if block.shape[0]:
        moments.update(as_float_tensor(np.asarray(block), "spaces"))
    return moments


class GeneralizedProcrustes(Persistable, BaseEstimator):
    """Align M spaces of the same items to one shared "universe" with one orthogonal map per space.

    Generalised Procrustes analysis: maximise the agreement of all pairs,
    ``sum_{i != j} trace(R_i^T s_i X_i^T X_j s_j R_j)``, over orthogonal maps ``R_i`` (d_i, D) into a universe of
    ``D = max_i d_i`` dimensions (narrower spaces are zero-padded, as ``Procrustes`` does), by block coordinate
    ascent: each ``R_i`` in turn becomes the polar factor of ``X_i^T sum_{j != i} X_j R_j`` (monotone). The universe
    is ``U = mean_i s_i X_i R_i``. Translating space i into space j is ``R_i R_j^T`` (with scales and means): O(M)
    maps whose compositions are consistent by construction (i -> j -> k equals i -> k).

    The fit reads the data only through the cross-products of all spaces, one ``CrossMoments`` over the
    concatenated features, accumulated in float64 a few rows at a time: ``partial_fit`` over chunks equals a
    one-shot fit, and dask arrays are reduced block by block on a cluster (``latentstitch.distributed``) before the
    same solve. Memory: (sum_i d_i)^2 float64 values.

    Usable as a ``Bridge`` translation route: ``fit(source, target)`` (two spaces) then ``transform(source)``
    returns the source translated into the target's absolute space.

    Parameters
    ----------
    center : bool
        Centre every space on its mean (default), and restore the target mean when translating.
    scale : bool
        Rescale every space to unit mean squared norm (after centring) before aligning, so that spaces of different
        scales weigh equally (default). Translations undo the target's scale.
    max_iter : int
        Sweeps of block coordinate ascent over the M maps.
    tol : float
        Stop when a sweep improves the objective by less than ``tol`` times its value.

    Attributes
    ----------
    rotations_ : (M, D, D) float64 array or tensor
        ``rotations_[i, :d_i]`` is ``R_i`` (d_i, D), with orthonormal rows; the rows below are zero padding.
    means_ : (M, D)
        ``means_[i, :d_i]``: space i's mean (zeros without ``center``).
    scales_ : list of float
        ``s_i`` (1.0 without ``scale``).
    n_features_ : list of int
        d_i.
    pairwise_scores_ : (M, M) array
        Agreement of each pair in the universe, ``trace(R_i^T X_i^T X_j R_j) / (||X_i|| ||X_j||)`` (of the centred,
        scaled spaces), in [-1, 1]: 1 when the two spaces are the same up to rotation (and scale), near 0 for
        unrelated spaces (e.g. shuffled rows).
    score_ : float
        Mean of the off-diagonal ``pairwise_scores_``.
    n_iter_ : int
        Sweeps run.
    moments_ : CrossMoments
        The accumulated statistics of the concatenated spaces.
    """

    def __init__(self, center: bool = True, scale: bool = True, max_iter: int = 100, tol: float = 1e-10):
        self.center = center
        self.scale = scale
        self.max_iter = max_iter
        self.tol = tol

    # --- fitting -------------------------------------------------------------------------------------------
    def fit(self, spaces: Sequence[ArrayLike] | ArrayLike, target: ArrayLike | None = None) -> GeneralizedProcrustes:
        """Fit from a list of M >= 2 tables of the same items (row i of every table is the same item), numpy,
        torch or dask; or, in the Bridge-route form, ``fit(source, target)``. Returns ``self``."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, name)
        return self.partial_fit(spaces, target)

    def partial_fit(
        self, spaces: Sequence[ArrayLike] | ArrayLike, target: ArrayLike | None = None
    ) -> GeneralizedProcrustes:
        """Add a chunk of rows of every space to the statistics and refit; returns ``self``."""
        self._check_params()
        tables = self._tables(spaces, target)
        previous = getattr(self, "moments_", None)
        if any(is_dask_array(t) for t in tables):
            widths = [int(t.shape[1]) for t in tables]
            self._check_widths(widths, previous)
            chunk = self._dask_moments(tables)
            like: ArrayLike = np.empty(0)
        else:
            # validated first: a list of lists or a 1-D table is named, not a crash on its shape
            checked = [as_float_tensor(t, f"spaces[{i}]", ndim=2, min_rows=1) for i, t in enumerate(tables)]
            for i, t in enumerate(checked[1:], 1):
                check_same_rows(checked[0], t, "spaces[0]", f"spaces[{i}]")
            widths = [int(t.shape[1]) for t in checked]
            self._check_widths(widths, previous)
            chunk = self._memory_moments(checked)
            like = tables[0]
        moments = chunk if previous is None else previous.merge(chunk)
        self.moments_ = moments
        self.n_features_ = widths
        self._solve(moments, like)
        return self

    def _check_widths(self, widths: list[int], previous: Any) -> None:
        if previous is not None and widths != self.n_features_:
            raise ValueError(f"spaces: widths {widths} differ from the earlier chunks' {self.n_features_}")

    def _tables(self, spaces: Sequence[ArrayLike] | ArrayLike, target: ArrayLike | None) -> list[Any]:
        if target is not None:
            tables = [spaces, target]
            self._route = True
        else:
            if isinstance(spaces, (np.ndarray, torch.Tensor)) or is_dask_array(spaces):
                raise TypeError("spaces: expected a list of M >= 2 tables (or fit(source, target)), got one array")
            tables = list(spaces)
            self._route = False
        if len(tables) < 2:
            raise ValueError(f"spaces: expected at least 2 tables, got {len(tables)}")
        return tables

    @staticmethod
    def _memory_moments(tables: list[torch.Tensor]) -> CrossMoments:
        moments = CrossMoments(products=("aa",))
        width = sum(t.shape[1] for t in tables)
        step = max(1, _CHUNK_ELEMENTS // width)
        for start in range(0, tables[0].shape[0], step):
            rows = [t[start : start + step].detach().to(device=tables[0].device, dtype=torch.float64) for t in tables]
            moments.update(torch.cat(rows, dim=1))
        return moments

    @staticmethod
    def _dask_moments(tables: list[Any]) -> CrossMoments:
        import dask.array as da

        lead = next(t for t in tables if is_dask_array(t))
        lead = dask_rows(lead, "spaces", ndim=(2,))
        aligned = [dask_rows(t, f"spaces[{i}]", ndim=(2,), rows=lead.chunks[0]) for i, t in enumerate(tables)]
        for i, t in enumerate(aligned[1:], 1):
            if t.shape[0] != aligned[0].shape[0]:
                raise ValueError(f"spaces[0] and spaces[{i}] must have the same number of samples (rows)")
        stacked = da.concatenate([t.astype(np.float64) for t in aligned], axis=1).rechunk({1: -1})
        return reduce_blocks(_block_moments, stacked)

    def _solve(self, moments: CrossMoments, like: ArrayLike) -> None:
        if moments.count < 2:
            raise ValueError(f"spaces: generalised Procrustes needs at least 2 rows, got {moments.count}")
        gram = moments.centered_aa() if self.center else moments.raw_aa()
        mean = moments.mean_a if self.center else torch.zeros_like(moments.mean_a)
        bounds = np.cumsum([0, *self.n_features_])
        blocks = [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        total = [float(torch.trace(gram[b, b])) for b in blocks]
        for i, value in enumerate(total):
            if value <= 0:
                raise ValueError(f"spaces[{i}]: is constant{' after centring' if self.center else ''}")
        scales = [(moments.count / value) ** 0.5 if self.scale else 1.0 for value in total]
        cross = [[gram[bi, bj] * (scales[i] * scales[j]) for j, bj in enumerate(blocks)] for i, bi in enumerate(blocks)]
        rotations, n_iter = _align(cross, max(self.n_features_), self.max_iter, self.tol)
        norms = [(total[i] ** 0.5) * scales[i] for i in range(len(blocks))]
        m = len(blocks)
        pairwise = np.ones((m, m))
        for i in range(m):
            for j in range(m):
                if i != j:
                    agreement = torch.trace(rotations[i].T @ cross[i][j] @ rotations[j])
                    pairwise[i, j] = float(agreement) / (norms[i] * norms[j])
        width = max(self.n_features_)
        stacked = torch.zeros((m, width, width), dtype=torch.float64, device=gram.device)
        means = torch.zeros((m, width), dtype=torch.float64, device=gram.device)
        for i, b in enumerate(blocks):
            stacked[i, : self.n_features_[i]] = rotations[i]
            means[i, : self.n_features_[i]] = mean[b]
        self.rotations_ = wrap_like(stacked, like)
        self.means_ = wrap_like(means, like)
        self.scales_ = scales
        self.pairwise_scores_ = pairwise
        self.score_ = float(pairwise[~np.eye(m, dtype=bool)].mean())
        self.n_iter_ = n_iter
        self.route_ = bool(getattr(self, "_route", False))

    # --- use -----------------------------------------------------------------------------------------------
    def transform(self, x: ArrayLike, index: int | None = None) -> ArrayLike:
        """Vectors of space ``index`` (n, d_index) into the shared universe (n, D): ``s_i (x - mean_i) R_i``.

        ``index=None`` is the Bridge-route form, after ``fit(source, target)``: the source translated into the
        target's absolute space (``translate(x, 0, 1)``). Numpy or torch in, the same type out.
        """
        check_is_fitted(self, "rotations_")
        if index is None:
            if not self.route_:
                raise ValueError("index: give the space x comes from (fitted on a list of spaces, not source/target)")
            return self.translate(x, 0, 1)
        index = self._index(index, "index")
        xt = self._input(x, index, "x")
        return wrap_like(self._to_universe(xt, index), x)

    def inverse_transform(self, z: ArrayLike, index: int) -> ArrayLike:
        """Universe vectors (n, D) into space ``index``'s absolute coordinates: ``z R_i^T / s_i + mean_i``."""
        check_is_fitted(self, "rotations_")
        index = self._index(index, "index")
        zt = as_float_tensor(z, "z", ndim=2)
        width = max(self.n_features_)
        if zt.shape[1] != width:
            raise ValueError(f"z: has {zt.shape[1]} features but the universe has {width}")
        return wrap_like(self._from_universe(zt, index), z)

    def translate(self, x: ArrayLike, source: int, target: int) -> ArrayLike:
        """Vectors of space ``source`` into space ``target``'s absolute coordinates, through the universe."""
        check_is_fitted(self, "rotations_")
        source, target = self._index(source, "source"), self._index(target, "target")
        xt = self._input(x, source, "x")
        return wrap_like(self._from_universe(self._to_universe(xt, source), target), x)

    def _to_universe(self, xt: torch.Tensor, index: int) -> torch.Tensor:
        rotation, mean = self._learned(index, xt)
        return ((xt - mean) * self.scales_[index]) @ rotation

    def _from_universe(self, zt: torch.Tensor, index: int) -> torch.Tensor:
        rotation, mean = self._learned(index, zt)
        return (zt @ rotation.T) / self.scales_[index] + mean

    def _learned(self, index: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.n_features_[index]
        rotation = as_float_tensor(self.rotations_, "rotations_")[index, :d]
        mean = as_float_tensor(self.means_, "means_")[index, :d]
        return match_reference(rotation, like, "rotations_", "x"), match_reference(mean, like, "means_", "x")

    def _index(self, index: object, name: str) -> int:
        m = len(self.n_features_)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < m:
            raise ValueError(f"{name}: expected the index of a fitted space, 0 to {m - 1}; got {index!r}")
        return int(index)

    def _input(self, x: ArrayLike, index: int, name: str) -> torch.Tensor:
        xt = as_float_tensor(x, name, ndim=2)
        if xt.shape[1] != self.n_features_[index]:
            raise ValueError(f"{name}: has {xt.shape[1]} features but space {index} has {self.n_features_[index]}")
        return xt

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "center": rule(check_bool),
        "scale": rule(check_bool),
        "max_iter": rule(check_positive_int),
        "tol": rule(check_nonnegative),
    }

    def _check_loaded(self) -> None:
        m, width = len(self.n_features_), max(self.n_features_)
        if tuple(self.rotations_.shape) != (m, width, width) or tuple(self.means_.shape) != (m, width):
            raise ValueError(
                f"rotations_ {tuple(self.rotations_.shape)} / means_ {tuple(self.means_.shape)} disagree with "
                f"{m} spaces of widths {self.n_features_}"
            )
        if len(self.scales_) != m:
            raise ValueError(f"scales_ has {len(self.scales_)} entries for {m} spaces")
        if tuple(np.shape(self.pairwise_scores_)) != (m, m):
            raise ValueError(
                f"pairwise_scores_ has shape {tuple(np.shape(self.pairwise_scores_))}, expected ({m}, {m})"
            )


def _align(cross: list[list[torch.Tensor]], width: int, max_iter: int, tol: float) -> tuple[list[torch.Tensor], int]:
    """Block coordinate ascent of ``sum_{i != j} trace(R_i^T C_ij R_j)`` over (d_i, width) orthonormal-row maps."""
    m = len(cross)
    widths = [cross[i][i].shape[0] for i in range(m)]
    reference = int(np.argmax(widths))
    eye = torch.eye(width, dtype=torch.float64, device=cross[0][0].device)
    rotations = [eye[: widths[i]].clone() for i in range(m)]
    for i in range(m):  # start: every space aligned to the widest one
        if i != reference:
            rotations[i] = orthogonal_factor(cross[i][reference] @ rotations[reference])

    def objective() -> float:
        return sum(
            float(torch.sum(rotations[i] * (cross[i][j] @ rotations[j]))) for i in range(m) for j in range(m) if i != j
        )

    value = objective()
    sweeps = 0
    while sweeps < max_iter:
        sweeps += 1
        for i in range(m):
            pull = sum(cross[i][j] @ rotations[j] for j in range(m) if j != i)
            rotations[i] = orthogonal_factor(pull)
        new = objective()
        done = new - value <= tol * abs(new)
        value = new
        if done:
            break
    return rotations, sweeps
