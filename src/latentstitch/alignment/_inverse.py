"""Inverse relative projection (Maiorca et al. 2024, arXiv 2406.15057): from relative space back to absolute space."""

from __future__ import annotations

import warnings
from typing import ClassVar

import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, match_reference, wrap_like
from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch._core.numerics import power_of_two_scale, safe_row_norms, unit_rows
from latentstitch._core.params import Rule, check_bool, check_choice, check_nonnegative, rule
from latentstitch._core.persist import Persistable
from latentstitch.alignment._common import gram_agreement, space
from latentstitch.relative import relative_projection

RESCALES = ("mean", "relative", "none")


class InverseRelativeProjection(Persistable, BaseEstimator):
    """Translate a source space into a target space *through* relative space, in closed form.

    A source vector is described by its cosine similarities to the source anchors (its relative representation,
    Moschella et al. 2023); the target vector whose cosine similarities to the *target* anchors best match them
    is found by least squares, and given a norm from the target's statistics:

    1. ``r = cos(x - mu_s, a_j - mu_s)`` for the m source anchors (``relative_projection``);
    2. ``u = argmin_u ||A_t u - r||`` with ``A_t`` (m, d_t) the L2-normalised (centred) target anchors:
       ``u = r @ pinv(A_t)^T``, the least-squares inverse of the relative projection;
    3. ``y = ||.|| * u / |u| + mu_t``: the direction of ``u`` rescaled to the target's norm statistics.

    Cosine relative representations are angle-preserving, so when the two spaces differ by an angle-preserving
    map (rotation, reflection, isotropic scale, and translation with ``center``) and the target anchors span the
    target space (m >= d_t, full rank), step 2 recovers the exact direction; the norm is not recoverable from
    angles, which is why the paper relies on decoders being (nearly) scale-invariant and rescales to the target
    anchors' mean norm. No official code was published; this follows the paper's formulation.

    Usable as a ``Bridge`` translation route: ``fit(source, target)`` on parallel rows (they become the anchors),
    ``transform(source)`` into the target's absolute space.

    Parameters
    ----------
    center : bool
        Centre each space on its anchors' mean before taking angles (translation invariance), and add the target
        anchors' mean back at the end. Default True; ``False`` is the paper's uncentred cosine.
    rescale : {"mean", "relative", "none"}
        Norm of the output (about the target mean): ``"mean"`` the target anchors' mean norm (the paper);
        ``"relative"`` the input's own norm times ``target_norm_ / source_norm_`` (keeps each sample's norm relative
        to its space, exact when the spaces differ by a rotation and an isotropic scale); ``"none"`` unit norm.
    ridge : float
        Tikhonov damping of the pseudo-inverse, in units of the squared singular values of ``A_t`` (singular values
        ``s`` are inverted as ``s / (s^2 + ridge)``). 0 (default) is the plain pseudo-inverse; use ``ridge > 0``
        when the target anchors are nearly collinear.

    Attributes
    ----------
    source_anchors_ : (m, d_s)
        The source anchors (raw), projected onto by ``transform``.
    decoder_ : (m, d_t)
        ``pinv(A_t)^T``: relative vectors times it give target directions.
    source_mean_, target_mean_ : (d_s,), (d_t,)
        Anchor means (zeros without ``center``).
    source_norm_, target_norm_ : float
        Mean norm of the (centred) source and target anchors.
    rank_ : int
        Numerical rank of ``A_t``; below d_t the directions of the target space the anchors do not span are lost.
    score_ : float
        Angle agreement of the anchors: correlation of the off-diagonal entries of the source and target anchors'
        cosine Gram matrices. Near 1 when the spaces agree on angles (the method's assumption); near 0 when the
        anchor pairs are unrelated (e.g. shuffled rows), a sign the translation cannot be trusted.

    Invariances: the output is unchanged by rotations, reflections and isotropic rescaling of the source (and,
    with ``center``, translations); it follows a rotation or reflection of the target (equivariance).
    """

    def __init__(self, center: bool = True, rescale: str = "mean", ridge: float = 0.0):
        self.center = center
        self.rescale = rescale
        self.ridge = ridge

    def fit(self, source_anchors: ArrayLike, target_anchors: ArrayLike) -> InverseRelativeProjection:
        """Fit from parallel anchors: the same m inputs embedded in the source (m, d_s) and the target (m, d_t)
        space. Returns ``self``."""
        self._check_params()
        ridge = float(self.ridge)
        s = space(source_anchors, "source_anchors")
        t = space(target_anchors, "target_anchors")
        check_same_rows(s, t, "source_anchors", "target_anchors")
        s64, t64 = s.detach().double(), t.detach().double().to(s.device)
        mean_s = s64.mean(dim=0) if self.center else torch.zeros_like(s64[0])
        mean_t = t64.mean(dim=0) if self.center else torch.zeros_like(t64[0])
        centred_s, centred_t = s64 - mean_s, t64 - mean_t
        unit_rows(centred_s, "source_anchors")  # a zero row (an anchor at the mean) has no angle: error naming it
        unit_t = unit_rows(centred_t, "target_anchors")
        u, singular, vh = torch.linalg.svd(unit_t, full_matrices=False)
        tolerance = max(unit_t.shape) * torch.finfo(torch.float64).eps * float(singular[0])
        keep = singular > tolerance
        rank = int(keep.sum())
        if rank < unit_t.shape[1]:
            warnings.warn(
                f"target_anchors: the {unit_t.shape[0]} normalised target anchors span {rank} of "
                f"{unit_t.shape[1]} dimensions; the translation cannot reach the other directions of the target "
                "space. Use at least as many (diverse) anchors as target features.",
                RankDeficiencyWarning,
                stacklevel=2,
            )
        inverse = singular[keep] / (singular[keep] ** 2 + ridge)
        self.source_anchors_ = wrap_like(s64, source_anchors)
        self.decoder_ = wrap_like((u[:, keep] * inverse) @ vh[keep], source_anchors)
        self.source_mean_ = wrap_like(mean_s, source_anchors)
        self.target_mean_ = wrap_like(mean_t, source_anchors)
        self.source_norm_ = _mean_norm(centred_s, "source_anchors")
        self.target_norm_ = _mean_norm(centred_t, "target_anchors")
        self.rank_ = rank
        self.n_features_in_, self.n_features_out_ = s.shape[1], t.shape[1]
        self.score_ = gram_agreement(centred_s, centred_t) if s.shape[0] >= 3 else float("nan")
        return self

    def transform(self, x: ArrayLike) -> ArrayLike:
        """Translate source vectors (n, d_s) into the target's absolute space (n, d_t); numpy or torch in, the same
        type, dtype and device out."""
        check_is_fitted(self, "decoder_")
        xt = as_float_tensor(x, "x", ndim=2)
        if xt.shape[1] != self.n_features_in_:
            raise ValueError(f"x: has {xt.shape[1]} features but the source anchors have {self.n_features_in_}")
        anchors = match_reference(as_float_tensor(self.source_anchors_, "source_anchors_"), xt, "anchors", "x")
        relative = relative_projection(xt, anchors, center=self.center)
        norms = None
        if self.rescale == "relative":
            shift = match_reference(as_float_tensor(self.source_mean_, "source_mean_"), xt, "source_mean_", "x")
            norms = safe_row_norms(xt - shift, "x", 0.0) / self.source_norm_  # exact at any magnitude; 0 at the mean
        return wrap_like(self._decode(relative, norms), x)

    def decode(self, relative: ArrayLike) -> ArrayLike:
        """Map relative representations (n, m) -- cosine similarities to the m anchors, e.g. computed by another
        model's ``relative_projection`` on its own parallel anchors -- into the target's absolute space (n, d_t).
        With ``rescale="relative"`` the input's norm is unknown here, so the target mean norm is used."""
        check_is_fitted(self, "decoder_")
        rt = as_float_tensor(relative, "relative", ndim=2)
        m = self.decoder_.shape[0]
        if rt.shape[1] != m:
            raise ValueError(f"relative: has {rt.shape[1]} columns but the model has {m} anchors")
        return wrap_like(self._decode(rt, None), relative)

    def _decode(self, relative: torch.Tensor, norms: torch.Tensor | None) -> torch.Tensor:
        decoder = match_reference(as_float_tensor(self.decoder_, "decoder_"), relative, "decoder_", "x")
        direction = relative @ decoder
        length = torch.linalg.vector_norm(direction, dim=1, keepdim=True)
        direction = direction / torch.where(length > 0, length, torch.ones_like(length))
        if self.rescale != "none":
            direction = direction * (self.target_norm_ if norms is None else norms * self.target_norm_)
        mean = match_reference(as_float_tensor(self.target_mean_, "target_mean_"), relative, "target_mean_", "x")
        return direction + mean

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "center": rule(check_bool),
        "rescale": rule(check_choice, choices=RESCALES),
        "ridge": rule(check_nonnegative),
    }

    def _check_loaded(self) -> None:
        m, d_t = tuple(self.decoder_.shape)
        if tuple(self.source_anchors_.shape) != (m, self.n_features_in_) or d_t != self.n_features_out_:
            raise ValueError(
                f"decoder_ {tuple(self.decoder_.shape)} and source_anchors_ {tuple(self.source_anchors_.shape)} "
                f"disagree with the map {self.n_features_in_} -> {self.n_features_out_}"
            )
        if tuple(self.source_mean_.shape) != (self.n_features_in_,) or tuple(self.target_mean_.shape) != (d_t,):
            raise ValueError("source_mean_ / target_mean_ have the wrong length")


def _mean_norm(rows: torch.Tensor, name: str) -> float:
    """The mean Euclidean norm of the rows, exact at any magnitude whose mean float64 represents (squares of
    1e200-sized rows would overflow, those of 1e-200-sized ones underflow)."""
    norms = safe_row_norms(rows, name, None)
    scale = power_of_two_scale(norms.amax())  # the mean of norms scaled into [0.5, 1) cannot overflow
    return float((norms * scale).mean() / scale)
