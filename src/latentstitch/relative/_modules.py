"""Relative projections as torch modules, for use inside models."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_width, wrap_like
from latentstitch._core.numerics import safe_row_norms
from latentstitch._core.params import (
    check_bool,
    check_choice,
    check_nonnegative,
    check_optional_positive_int,
    check_positive_int,
    check_probability,
)
from latentstitch.relative._projection import relative_projection
from latentstitch.relative._similarities import get_similarity
from latentstitch.relative._sparsify import sparsifier
from latentstitch.relative._transforms import SPREAD_FLOOR, check_spread_floor, floored_variance

OUTPUT_NORMS = ("none", "l2", "layernorm", "batchnorm")


def _output_norm(kind: str, num_anchors: int | None) -> nn.Module | None:
    check_choice(kind, "output_norm", OUTPUT_NORMS)
    if kind in ("none", "l2"):
        return None
    if num_anchors is None:
        raise ValueError(f"num_anchors: output_norm={kind!r} has parameters per anchor; give num_anchors or anchors")
    num_anchors = check_positive_int(num_anchors, "num_anchors")
    return nn.LayerNorm(num_anchors) if kind == "layernorm" else nn.BatchNorm1d(num_anchors)


class _AnchoredProjection(nn.Module):
    """Shared anchor handling and output normalisation of the two projection modules."""

    anchors: torch.Tensor | None

    def __init__(self, anchors: torch.Tensor | None, num_anchors: int | None, output_norm: str):
        super().__init__()
        num_anchors = check_optional_positive_int(num_anchors, "num_anchors")
        if anchors is not None:
            anchors = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1).detach().clone()
            if num_anchors is not None and num_anchors != anchors.shape[0]:
                raise ValueError(f"num_anchors={num_anchors} but anchors has {anchors.shape[0]} rows")
            num_anchors = anchors.shape[0]
        self.register_buffer("anchors", anchors)
        self.output_norm = output_norm
        self.num_anchors = num_anchors
        self.norm = _output_norm(output_norm, num_anchors)

    def set_anchors(self, anchors: torch.Tensor) -> None:
        """Hold ``anchors`` (detached) as a buffer: it moves with ``.to()`` and is saved in the state dict."""
        anchors = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1).detach()
        if self.num_anchors is not None and anchors.shape[0] != self.num_anchors:
            raise ValueError(f"anchors: expected {self.num_anchors} anchors, got {anchors.shape[0]}")
        self.anchors = anchors

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A module built without anchors accepts the anchors of a saved one.
        key = prefix + "anchors"
        if self.anchors is None and state_dict.get(key) is not None:
            self.set_anchors(state_dict[key].clone())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _anchors_for(self, x: torch.Tensor, anchors: torch.Tensor | None) -> torch.Tensor:
        if anchors is None:
            anchors = self.anchors
        if anchors is None:
            raise ValueError("anchors: none given to forward() and none held; pass anchors=... or call set_anchors()")
        anchors = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
        if self.num_anchors is not None and anchors.shape[0] != self.num_anchors:
            raise ValueError(f"anchors: expected {self.num_anchors} anchors, got {anchors.shape[0]}")
        check_same_width(x, anchors, "x", "anchors")
        return anchors

    def _normalize_output(self, r: torch.Tensor) -> torch.Tensor:
        if self.output_norm == "l2":
            return r / safe_row_norms(r, "relative representation", 1e-12)
        if self.output_norm == "batchnorm" and self.training and r.shape[0] < 2:
            raise ValueError(
                f"x: output_norm='batchnorm' needs at least 2 samples per batch in train mode, got {r.shape[0]}; "
                "call .eval() to use the running statistics"
            )
        return r if self.norm is None else self.norm(r)


class RelativeProjection(_AnchoredProjection):
    """``x -> norm(sim(x, anchors))``: the relative representation as a layer (Moschella et al., ICLR 2023).

    Parameters
    ----------
    similarity : str
        A registered similarity (default cosine, the paper's choice).
    anchors : (m, d) tensor, optional
        Held as a buffer. Alternatively pass anchors to ``forward`` each call: models that re-embed their anchors
        with the current encoder at every step do that (under ``torch.no_grad()``, as the official code does).
    num_anchors : int, optional
        Needed by ``layernorm``/``batchnorm`` when ``anchors`` is not given.
    output_norm : {"none", "l2", "layernorm", "batchnorm"}
        Normalisation of the relative vector. The official AE/VAE use ``layernorm`` (LayerNorm(|A|) with affine
        parameters); stitching heads on frozen encoders use ``l2``.
    center : bool
        Subtract the anchors' mean first (adds translation invariance).
    top_k, power : optional
        Sparsify / sharpen each relative vector (``relative_projection``'s options; ASIF, Norelli et al. 2023),
        before ``output_norm``.
    **similarity_kwargs
        E.g. ``eps`` for cosine.
    """

    def __init__(
        self,
        similarity: str = "cosine",
        *,
        anchors: torch.Tensor | None = None,
        num_anchors: int | None = None,
        output_norm: str = "none",
        center: bool = False,
        top_k: int | None = None,
        power: float | None = None,
        **similarity_kwargs: Any,
    ):
        super().__init__(anchors, num_anchors, output_norm)
        spec = get_similarity(similarity)
        spec.check_options(similarity_kwargs)
        self.similarity = spec.name
        self.center = check_bool(center, "center")
        self.sparsify = {"top_k": top_k, "power": power}
        sparsifier(top_k, power, spec.kind, spec.name, None)  # checks the values now, not at the first forward
        self.similarity_kwargs = similarity_kwargs

    def forward(self, x: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
        x = as_float_tensor(x, "x", ndim=2, finite=False)
        anchors = self._anchors_for(x, anchors)
        r = relative_projection(
            x, anchors, self.similarity, center=self.center, **self.sparsify, **self.similarity_kwargs
        )
        return self._normalize_output(r)

    def extra_repr(self) -> str:
        return f"similarity={self.similarity!r}, num_anchors={self.num_anchors}, output_norm={self.output_norm!r}"


class RobustRelativeProjection(_AnchoredProjection):
    """The robust (normalised) relative transform of García-Castellanos et al. (arXiv 2409.10967).

    ``r(x)_j = cos((x - mu) / sigma, (a_j - mu) / sigma)``: per-feature batch normalisation without affine
    parameters, with the *same* statistics applied to the samples and to the anchors, then cosine similarity.

    Standardising each feature cancels any per-feature nonzero rescaling, any permutation of the features and
    any translation applied to samples and anchors together (and cosine removes the remaining sign flips), so
    the output is invariant to the intertwiner groups of ReLU and GELU networks. It is *not* invariant to a
    general rotation, unlike the plain cosine projection.

    Two uses:

    - **Frozen embeddings** (a pretrained encoder's vectors, numpy or torch): ``fit(anchors)`` takes ``mu`` and
      ``sigma`` from the anchors (or from ``statistics_from``, a larger sample of the same space), holds the
      anchors and switches to eval mode; ``transform(x)`` then returns the relative representation of ``x`` with
      ``x``'s type (numpy in, numpy out), dtype and device. Nothing depends on the batch.
    - **Inside a model being trained** (``forward``): in train mode, the mean and (biased) variance of the current
      batch ``x``, which needs at least two samples; the running estimates are updated with ``momentum`` as in
      ``nn.BatchNorm1d`` (unbiased variance). In eval mode, the running estimates. The official code instead
      normalises the anchors with their own batch statistics; sharing the batch statistics makes the invariance
      exact for any anchors and needs no second pass.

    Every variance is floored at ``(spread_floor * largest standard deviation)^2`` first (the rule of
    ``StandardScaling``), so near-dead features stay small instead of dominating the cosine; then ``eps`` is
    added, as in batch normalisation.

    Parameters
    ----------
    num_features : int
        Width d of the latent space.
    anchors, num_anchors, output_norm
        As in ``RelativeProjection``.
    momentum : float
        Running-statistics momentum (PyTorch convention; the official code used 0.3).
    eps : float >= 0
        Added to the variance, as in batch normalisation. 0 gives the exact standardisation (the floored variance is
        never 0: a constant feature gets divisor 1).
    spread_floor : float in [0, 1)
        Smallest standard deviation, as a fraction of the largest (default ``SPREAD_FLOOR`` = 1e-3).
    """

    def __init__(
        self,
        num_features: int,
        *,
        anchors: torch.Tensor | None = None,
        num_anchors: int | None = None,
        output_norm: str = "none",
        momentum: float = 0.1,
        eps: float = 1e-5,
        spread_floor: float = SPREAD_FLOOR,
    ):
        super().__init__(anchors, num_anchors, output_norm)
        self.num_features = check_positive_int(num_features, "num_features")
        if anchors is not None and self.anchors.shape[1] != num_features:
            raise ValueError(f"anchors: expected {num_features} features, got {self.anchors.shape[1]}")
        self.momentum = check_probability(momentum, "momentum")
        self.eps = check_nonnegative(eps, "eps")  # 0 is safe: the floored variance is never 0
        self.spread_floor = check_spread_floor(spread_floor)
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    @torch.no_grad()
    def fit(self, anchors: ArrayLike, statistics_from: ArrayLike | None = None) -> RobustRelativeProjection:
        """Freeze the transform for fixed embeddings: hold ``anchors`` and take the per-feature mean and (population)
        variance from them, or from ``statistics_from`` (more samples of the same space) when given. Puts the
        module in eval mode; returns ``self``."""
        t = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
        if t.shape[1] != self.num_features:
            raise ValueError(f"anchors: expected {self.num_features} features, got {t.shape[1]}")
        sample = t if statistics_from is None else as_float_tensor(statistics_from, "statistics_from", ndim=2)
        if sample.shape[1] != self.num_features:
            raise ValueError(f"statistics_from: expected {self.num_features} features, got {sample.shape[1]}")
        if sample.shape[0] < 2:
            raise ValueError(f"anchors: per-feature statistics need at least 2 samples, got {sample.shape[0]}")
        sample = sample.detach()
        if not bool((sample != sample[0]).any()):
            raise ValueError("anchors: every feature is constant over the samples, so there is nothing to standardise")
        self.set_anchors(t.detach().clone())
        # float64 embeddings keep float64 statistics (the buffers take the sample's dtype and device)
        self.running_mean = sample.mean(dim=0)
        self.running_var = sample.var(dim=0, unbiased=False)
        self.num_batches_tracked.fill_(1)
        return self.eval()

    @torch.no_grad()
    def transform(self, x: ArrayLike) -> ArrayLike:
        """The relative representation of frozen embeddings ``x`` (n, d) with the statistics and anchors of
        ``fit``: an (n, num_anchors) array of ``x``'s type, dtype and device. Never updates the statistics."""
        if self.anchors is None or int(self.num_batches_tracked) == 0:
            raise ValueError("RobustRelativeProjection: call fit(anchors) before transform(x)")
        xt = as_float_tensor(x, "x", ndim=2)
        if xt.shape[1] != self.num_features:
            raise ValueError(f"x: expected {self.num_features} features, got {xt.shape[1]}")
        training = self.training
        self.eval()
        try:
            return wrap_like(self.forward(xt), x)
        finally:
            self.train(training)

    def forward(self, x: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
        x = as_float_tensor(x, "x", ndim=2)  # NaN would spread through the batch statistics into every row
        if x.shape[1] != self.num_features:
            raise ValueError(f"x: expected {self.num_features} features, got {x.shape[1]}")
        anchors = self._anchors_for(x, anchors)
        mean, var = self._statistics(x)
        scale = torch.rsqrt(floored_variance(var, self.spread_floor) + self.eps)
        r = relative_projection((x - mean) * scale, (anchors - mean) * scale, "cosine")
        return self._normalize_output(r)

    def _statistics(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.training:
            return self.running_mean.to(x.dtype), self.running_var.to(x.dtype)
        if x.shape[0] < 2:
            raise ValueError(
                f"x: batch statistics need at least 2 samples in train mode, got {x.shape[0]}; "
                "call .eval() to use the running statistics"
            )
        mean = x.mean(dim=0)
        var = x.var(dim=0, unbiased=False)
        with torch.no_grad():
            n = x.shape[0]
            self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), self.momentum)
            unbiased = var.detach().to(self.running_var.dtype) * (n / (n - 1))
            self.running_var.lerp_(unbiased, self.momentum)
            self.num_batches_tracked += 1
        return mean, var

    def extra_repr(self) -> str:
        return (
            f"num_features={self.num_features}, num_anchors={self.num_anchors}, momentum={self.momentum}, "
            f"spread_floor={self.spread_floor}"
        )
