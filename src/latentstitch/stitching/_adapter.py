"""A small residual MLP adapter between two embedding spaces (Drift-Adapter, Vejendla, EMNLP 2025).

Drift-Adapter maps a new embedding model's vectors into an old model's space so the old index keeps working; of its
three parameterisations (orthogonal Procrustes, low-rank affine, residual MLP) the residual MLP recovers the most
retrieval. Here: ``y = x @ coef_ + intercept_ + relu(z(x) @ w1_ + b1_) @ w2_ + b2_``, where the linear part is ridge
least squares on the raw vectors (closed form, ``LeastSquares(ridge, ridge_units="relative")``), ``z`` standardises
the input with the training rows' statistics, and the MLP (one hidden layer of ``hidden`` units) learns what the
linear map leaves. Its output layer starts at zero, so training starts from the linear map; Adam on the mean squared
error in the target's own units, full batches, and early stopping on a held-out share of the anchors
(``validation_fraction``): the weights of the best validation epoch are kept, which is the linear map itself when
the MLP never helps. Deterministic under ``seed`` (CPU float32 training).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, wrap_like
from latentstitch._core.numerics import power_of_two_scale, safe_norm_range
from latentstitch._core.params import Rule, check_nonnegative, check_positive, check_positive_int, check_seed, rule
from latentstitch._core.persist import Persistable
from latentstitch.relative import SPREAD_FLOOR, floored_spread
from latentstitch.stitching._least_squares import LeastSquares


def _training_scale(t: torch.Tensor) -> float:
    """The power of two that brings ``t`` (float64 or narrower) into float32's exact range when its largest magnitude
    lies outside it (1e+30, 1e-200): training runs on ``t * scale``, and the learned maps are scaled back exactly.
    1.0 otherwise (and for NaN/inf, refused later)."""
    top = float(t.abs().amax()) if t.numel() else 0.0
    low, high = safe_norm_range(torch.float32, max(t.shape[1], 1))
    if not np.isfinite(top) or top == 0.0 or low <= top <= high:
        return 1.0
    return float(power_of_two_scale(torch.tensor(top, dtype=torch.float64)))


def _fraction(value: object, name: str) -> float:
    value = check_positive(value, name)
    if not value < 0.5:
        raise ValueError(f"{name}: expected a fraction in (0, 0.5), got {value}")
    return value


class ResidualAdapter(Persistable, BaseEstimator):
    """Ridge map plus a small residual MLP, trained on parallel anchors with early stopping.

    Parameters
    ----------
    hidden : int
        Hidden units of the MLP (default 256: about 0.4M parameters for 768 -> 768).
    ridge : float
        The linear part's ridge, a fraction of the mean eigenvalue of the centred source Gram matrix.
    epochs : int
        Most training epochs (full batches); ``patience`` epochs without a better validation loss stop it.
    lr, weight_decay : float
        Adam's step size and L2 penalty on the MLP weights.
    validation_fraction : float
        Share of the anchors held out for early stopping (at least 2 rows).
    seed : int
        The split, the initialisation and nothing else (training is full-batch).

    Learned: ``coef_`` (p, q), ``intercept_`` (q,), ``mean_``, ``scale_`` (p,), ``w1_`` (p, hidden), ``b1_``,
    ``w2_`` (hidden, q), ``b2_``; ``best_epoch_`` (0: the MLP did not help on held-out anchors),
    ``validation_loss_`` (of the linear map, and of the kept weights).

    Vectors beyond float32's exact range (largest magnitude above about 1e+18 or below about 1e-15) are trained on
    after an exact power-of-two rescaling of each side, and the learned maps are scaled back: the adapter is the
    one fitted to the rescaled vectors, expressed at the input's scale. ``validation_loss_`` stays in the units
    training ran in (those of ``target`` times that power of two, whose squares are representable).
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "hidden": rule(check_positive_int),
        "ridge": rule(check_nonnegative),
        "epochs": rule(check_positive_int),
        "lr": rule(check_positive),
        "weight_decay": rule(check_nonnegative),
        "validation_fraction": rule(_fraction),
        "patience": rule(check_positive_int),
        "seed": rule(check_seed),
    }

    def __init__(
        self,
        hidden: int = 256,
        ridge: float = 0.01,
        epochs: int = 300,
        lr: float = 3e-3,
        weight_decay: float = 1e-4,
        validation_fraction: float = 0.1,
        patience: int = 20,
        seed: int = 0,
    ):
        self.hidden = hidden
        self.ridge = ridge
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.seed = seed

    def fit(self, source: ArrayLike, target: ArrayLike) -> ResidualAdapter:
        self._check_params()
        x = as_float_tensor(source, "source", ndim=2, min_rows=4).detach().cpu()
        y = as_float_tensor(target, "target", ndim=2, min_rows=4).detach().cpu()
        check_same_rows(x, y, "source", "target")
        sx, sy = _training_scale(x), _training_scale(y)  # exact powers of two, 1.0 at ordinary magnitudes
        x, y = (x * sx).to(torch.float32), (y * sy).to(torch.float32)
        n = x.shape[0]
        order = np.random.default_rng(self.seed).permutation(n)
        held = max(2, round(n * self.validation_fraction))
        if n - held < 2:
            raise ValueError(f"source: a residual adapter needs at least {held + 2} anchor pairs, got {n}")
        val, train = torch.as_tensor(order[:held]), torch.as_tensor(order[held:])
        linear = LeastSquares(ridge=self.ridge, ridge_units="relative").fit(x[train].double(), y[train].double())
        coef, intercept = (t.to(torch.float32) for t in linear._map64())
        mean = x[train].mean(dim=0)
        scale = floored_spread(x[train].std(dim=0, correction=0), SPREAD_FLOOR)
        generator = torch.Generator().manual_seed(self.seed)
        w1 = torch.randn(x.shape[1], self.hidden, generator=generator) * np.sqrt(2.0 / x.shape[1])
        params = [w1.requires_grad_(), torch.zeros(self.hidden, requires_grad=True)]
        params += [
            torch.zeros(self.hidden, y.shape[1], requires_grad=True),
            torch.zeros(y.shape[1], requires_grad=True),
        ]
        base = x @ coef + intercept
        z = (x - mean) / scale

        def loss(rows: torch.Tensor) -> torch.Tensor:
            out = base[rows] + torch.relu(z[rows] @ params[0] + params[1]) @ params[2] + params[3]
            return ((out - y[rows]) ** 2).sum(dim=1).mean()

        optimiser = torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay)
        with torch.no_grad():
            best_loss = first = float(loss(val))
        best, best_epoch, waited = [p.detach().clone() for p in params], 0, 0
        for epoch in range(1, self.epochs + 1):
            optimiser.zero_grad()
            loss(train).backward()
            optimiser.step()
            with torch.no_grad():
                current = float(loss(val))
            if current < best_loss:
                best_loss, best, best_epoch, waited = current, [p.detach().clone() for p in params], epoch, 0
            else:
                waited += 1
                if waited >= self.patience:
                    break
        like = source
        # trained on (x sx, y sy): y = (x sx) coef / sy + intercept / sy + relu((x - mean / sx) / (scale / sx) ...)
        coef64, mean64, scale64 = coef.double() * sx / sy, mean.double() / sx, scale.double() / sx
        w1, b1, w2, b2 = (p.double() for p in best)
        w2, b2, intercept64 = w2 / sy, b2 / sy, intercept.double() / sy
        if not all(bool(torch.isfinite(t).all()) for t in (coef64, intercept64, mean64, scale64, w2, b2)):
            raise ValueError("source, target: the map between their magnitudes overflows float64; rescale one side")
        self.coef_, self.intercept_ = wrap_like(coef64, like), wrap_like(intercept64, like)
        self.mean_, self.scale_ = wrap_like(mean64, like), wrap_like(scale64, like)
        self.w1_, self.b1_, self.w2_, self.b2_ = (wrap_like(p, like) for p in (w1, b1, w2, b2))
        self.best_epoch_ = best_epoch
        self.validation_loss_ = [first, best_loss]
        self.n_features_in_, self.n_features_out_ = x.shape[1], y.shape[1]
        return self

    def transform(self, source: ArrayLike) -> ArrayLike:
        """Bridged vectors (n, q) of source vectors (n, p), of the input's type, dtype and device."""
        check_is_fitted(self, "w2_")
        x = as_float_tensor(source, "source", ndim=2)
        if x.shape[1] != self.n_features_in_:
            raise ValueError(f"source: has {x.shape[1]} features but the adapter was fitted on {self.n_features_in_}")
        w = {n: as_float_tensor(getattr(self, n), n).to(device=x.device, dtype=torch.float64) for n in self._tensors}
        with torch.no_grad():
            x64 = x.detach().to(torch.float64)
            hidden = torch.relu(((x64 - w["mean_"]) / w["scale_"]) @ w["w1_"] + w["b1_"])
            out = x64 @ w["coef_"] + w["intercept_"] + hidden @ w["w2_"] + w["b2_"]
        return wrap_like(out.to(x.dtype), source)

    _tensors = ("coef_", "intercept_", "mean_", "scale_", "w1_", "b1_", "w2_", "b2_")

    def _check_loaded(self) -> None:
        p, q, h = self.n_features_in_, self.n_features_out_, self.hidden
        shapes = {"coef_": (p, q), "intercept_": (q,), "mean_": (p,), "scale_": (p,), "w1_": (p, h)}
        shapes.update({"b1_": (h,), "w2_": (h, q), "b2_": (q,)})
        for name, shape in shapes.items():
            if tuple(as_float_tensor(getattr(self, name), name).shape) != shape:
                raise ValueError(f"{name} has shape {tuple(np.shape(getattr(self, name)))}, expected {shape}")
