"""Latent translation between the two encoders, fitted on the parallel anchors only: ridge least squares (the ridge
chosen by cross-validation on the anchors) and orthogonal Procrustes, after standard scaling."""

from __future__ import annotations

import itertools
import warnings

import torch

from latentstitch._core.least_squares import RankDeficiencyWarning
from latentstitch.experiments.cross_architecture_vision.config import ENCODERS
from latentstitch.stitching import LatentTranslator, LeastSquares, Procrustes, ridge_path


def fit_translators(anchors: dict[str, torch.Tensor], candidates: tuple[float, ...]) -> tuple[dict, dict]:
    """For each ordered pair of encoders, ``LatentTranslator``s with ridge least squares (the ridge among
    ``candidates`` by cross-validation on the anchors) and with Procrustes, fitted on all the anchors."""
    translators, ridges = {}, {}
    for source, target in itertools.permutations(ENCODERS, 2):
        a, b = anchors[source].double(), anchors[target].double()
        ridge = cross_validated_ridge(a, b, candidates)
        ridges[source, target] = ridge
        with warnings.catch_warnings():
            # fewer anchors than features: A^T B is rank-deficient, Procrustes picks one optimum (expected here)
            warnings.simplefilter("ignore", RankDeficiencyWarning)
            translators[source, target, "translation (ridge LS)"] = LatentTranslator(LeastSquares(ridge=ridge)).fit(
                a, b
            )
            translators[source, target, "translation (Procrustes)"] = LatentTranslator(Procrustes()).fit(a, b)
    return translators, ridges


def cross_validated_ridge(a: torch.Tensor, b: torch.Tensor, candidates: tuple[float, ...], folds: int = 5) -> float:
    """The ridge among ``candidates`` with the best mean held-out R^2 of ``LatentTranslator(LeastSquares(ridge))``
    over ``folds`` seeded folds of the anchor pairs (no labels, no test data); a single candidate is returned as is.
    (``latentstitch.stitching.ridge_path``: every candidate from one eigendecomposition per fold.)"""
    if len(candidates) == 1:
        return float(candidates[0])
    return ridge_path(a, b, candidates, folds=folds, seed=0, standardize=True, ridge_units="gram").best
