"""A linear classification head on vectors (multinomial logistic regression), persistable like every estimator.

``Bridge.fit_head`` trains one on what the chosen route reads on the target side (the target's own vectors for a
translation route, its relative vectors for a relative route); the same head then reads ``Bridge.transform`` of
the new model's vectors.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from latentstitch._core.arrays import ArrayLike, as_float_tensor, to_numpy, wrap_like
from latentstitch._core.params import Rule, check_positive, check_positive_int, rule
from latentstitch._core.persist import Persistable
from latentstitch.bridge._validate import check_class_labels
from latentstitch.relative import StandardScaling


class LinearHead(Persistable, BaseEstimator):
    """Multinomial logistic regression on standard-scaled vectors (scikit-learn's ``LogisticRegression``, L2).

    Parameters
    ----------
    C : float
        Inverse L2 strength, as in scikit-learn (default 1.0).
    max_iter : int
        Iterations of the L-BFGS solver.

    Learned: ``scaler_`` (``StandardScaling`` on the training vectors), ``coef_`` (d, classes), ``intercept_``,
    ``classes_`` (the labels, a list). ``decision_function``/``predict_proba``/``predict`` take numpy or torch
    vectors; scores come back in the input's type, labels as a numpy array.
    """

    _parameter_constraints: ClassVar[dict[str, Rule]] = {
        "C": rule(check_positive),
        "max_iter": rule(check_positive_int),
    }

    def __init__(self, C: float = 1.0, max_iter: int = 1000):
        self.C = C
        self.max_iter = max_iter

    def fit(self, x: ArrayLike, labels: ArrayLike) -> LinearHead:
        from sklearn.linear_model import LogisticRegression

        self._check_params()
        xt = as_float_tensor(x, "x", ndim=2, min_rows=2)
        y = check_class_labels(labels, xt.shape[0])
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"labels: a classifier needs at least 2 classes, got only {classes.tolist()}")
        self.scaler_ = StandardScaling().fit(xt.detach().cpu().double())
        scaled = to_numpy(self.scaler_.transform(xt.detach().cpu().double()), "x")
        model = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(scaled, y)
        coef = model.coef_.T if classes.size > 2 else np.concatenate([-model.coef_.T, model.coef_.T], axis=1) / 2
        intercept = model.intercept_ if classes.size > 2 else np.array([-model.intercept_[0], model.intercept_[0]]) / 2
        self.coef_ = np.ascontiguousarray(coef, dtype=np.float64)
        self.intercept_ = np.asarray(intercept, dtype=np.float64)
        self.classes_ = classes.tolist()
        return self

    def decision_function(self, x: ArrayLike) -> ArrayLike:
        """Class scores (n, classes) of ``x``, of ``x``'s type."""
        check_is_fitted(self, "coef_")
        xt = as_float_tensor(x, "x", ndim=2)
        if xt.shape[1] != self.coef_.shape[0]:
            raise ValueError(f"x: has {xt.shape[1]} features but the head was trained on {self.coef_.shape[0]}")
        scaled = as_float_tensor(self.scaler_.transform(xt.detach().double()), "x")
        coef = torch.as_tensor(self.coef_, device=scaled.device)
        scores = scaled @ coef + torch.as_tensor(self.intercept_, device=scaled.device)
        return wrap_like(scores.to(xt.dtype), x)

    def predict_proba(self, x: ArrayLike) -> ArrayLike:
        scores = as_float_tensor(self.decision_function(x), "scores")
        return wrap_like(torch.softmax(scores, dim=1), x)

    def predict(self, x: ArrayLike) -> np.ndarray:
        """Labels (a numpy array of the training labels' values)."""
        scores = to_numpy(as_float_tensor(self.decision_function(x), "scores"), "scores")
        return np.asarray(self.classes_)[scores.argmax(axis=1)]

    def score(self, x: ArrayLike, labels: ArrayLike) -> float:
        """Accuracy of ``predict(x)`` against ``labels``."""
        y = to_numpy(labels, "labels") if isinstance(labels, torch.Tensor) else np.asarray(labels)
        return float(np.mean(self.predict(x) == y))

    def _check_loaded(self) -> None:
        if np.shape(self.coef_) != (self.scaler_.n_features_in_, len(self.classes_)):
            raise ValueError(
                f"coef_ has shape {np.shape(self.coef_)}, expected ({self.scaler_.n_features_in_}, classes)"
            )
        if np.shape(self.intercept_) != (len(self.classes_),):
            raise ValueError(f"intercept_ has shape {np.shape(self.intercept_)}, expected ({len(self.classes_)},)")
