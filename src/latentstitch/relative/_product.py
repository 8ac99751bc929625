"""Product of invariances (Cannistraci et al., "From Bricks to Bridges: Product of Invariances to Enhance Latent
Space Communication", ICLR 2024).

The transformation between two latent spaces is rarely known in advance: an orthogonal map, a rescaling per
neuron, a translation... Each similarity function makes the relative representation invariant to one class
(``SIMILARITIES[name].invariances``). The product builds several relative spaces of the same anchors, one per
similarity (cosine, Euclidean, L1, L-infinity by default), standardises each over its anchors and combines them
(``latentstitch.relative._aggregation``); a head trained on the product picks, from data, the components that
carry over. The frozen representation is invariant to what *every* component is invariant to (the intersection,
``shared_invariances``), and each component separately carries its own invariances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_width, match_reference, wrap_like
from latentstitch.invariance import ISOTROPIC_SCALE, closure
from latentstitch.relative._aggregation import SpaceAggregation, aggregate_spaces
from latentstitch.relative._modules import _AnchoredProjection
from latentstitch.relative._projection import relative_projection
from latentstitch.relative._similarities import get_similarity

#: The paper's four similarity functions.
DEFAULT_SIMILARITIES = ("cosine", "euclidean", "l1", "linf")
# Similarities whose output is multiplied by a positive factor when samples and anchors are rescaled together
# (degree 1 or 2), which the per-sample standardisation divides out.
_HOMOGENEOUS = frozenset({"dot", "euclidean", "l1", "linf"})


def _check_similarities(similarities: Sequence[str]) -> tuple[str, ...]:
    if isinstance(similarities, str) or len(similarities) == 0:
        raise ValueError(f"similarities: expected a non-empty sequence of registered names, got {similarities!r}")
    try:
        names = tuple(get_similarity(name).name for name in similarities)
    except ValueError as error:  # get_similarity names the option of one similarity; here it is a list of them
        raise ValueError(f"similarities: {error}") from None
    if len(set(names)) != len(names):
        raise ValueError(f"similarities: names repeat: {list(names)}")
    return names


def shared_invariances(similarities: Sequence[str] = DEFAULT_SIMILARITIES) -> frozenset[str]:
    """The transformations the standardised product is invariant to: those every component is invariant to, where
    a component whose output only rescales under an isotropic rescaling (dot, euclidean, l1, linf) counts as
    isotropic-scale invariant once standardised."""
    sets = []
    for name in _check_similarities(similarities):
        own = set(get_similarity(name).invariances)
        if name in _HOMOGENEOUS:
            own.add(ISOTROPIC_SCALE)
        sets.append(closure(own))
    return frozenset.intersection(*sets)


def _spaces(
    x: torch.Tensor,
    anchors: torch.Tensor,
    similarities: Sequence[str],
    center: bool,
    options: Mapping[str, Mapping[str, Any]] | None,
) -> list[torch.Tensor]:
    options = _check_options(similarities, options)
    return [relative_projection(x, anchors, name, center=center, **options.get(name, {})) for name in similarities]


def _check_options(
    similarities: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None
) -> Mapping[str, Mapping[str, Any]]:
    """``{similarity name: {option: value}}`` for some of ``similarities``, each option one that similarity takes."""
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(v, Mapping) for v in options.values()):
        raise TypeError(f"similarity_options: expected {{similarity name: {{option: value}}}}, got {options!r}")
    unknown = set(options) - set(similarities)
    if unknown:
        raise ValueError(f"similarity_options: {sorted(unknown)} are not among the similarities {list(similarities)}")
    for name, values in options.items():
        try:
            get_similarity(name).check_options(dict(values))
        except (TypeError, ValueError) as error:
            raise type(error)(f"similarity_options[{name!r}]: {error}") from None
    return options


def product_of_invariances(
    x: ArrayLike,
    anchors: ArrayLike,
    similarities: Sequence[str] = DEFAULT_SIMILARITIES,
    aggregation: str = "concat",
    *,
    center: bool = False,
    similarity_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> ArrayLike:
    """The product-of-invariances representation of frozen embeddings ``x`` with respect to ``anchors``.

    One relative space per similarity, each standardised over the anchors (per sample: zero mean, unit variance),
    then concatenated (``"concat"``, (n, S m)) or summed (``"sum"``, (n, m)). For the learned aggregations use
    ``ProductOfInvariances``.

    Parameters
    ----------
    x : (n, d) array or tensor
    anchors : (m, d) array or tensor
    similarities : sequence of str
        Registered similarity names (default: cosine, euclidean, l1, linf, as in the paper).
    aggregation : {"concat", "sum"}
    center : bool
        Passed to every relative projection.
    similarity_options : {name: {option: value}}, optional
        Options of individual similarities, e.g. ``{"geodesic": {"n_neighbors": 5}}``.

    Returns
    -------
    (n, S m) or (n, m), of ``x``'s type. Invariant to ``shared_invariances(similarities)``.
    """
    names = _check_similarities(similarities)
    xt = as_float_tensor(x, "x", ndim=2, finite=False)
    at = as_float_tensor(anchors, "anchors", ndim=2, min_rows=1)
    check_same_width(xt, at, "x", "anchors")
    at = match_reference(at, xt, "anchors", "x")
    return wrap_like(aggregate_spaces(_spaces(xt, at, names, center, similarity_options), aggregation), x)


class ProductOfInvariances(_AnchoredProjection):
    """The product of invariances as a layer: relative spaces of several similarities, then an aggregation.

    Parameters
    ----------
    similarities : sequence of str
        Registered similarity names (default cosine, euclidean, l1, linf).
    aggregation : {"concat", "sum", "weighted", "mlp", "attention"}
        See ``latentstitch.relative._aggregation``: each space goes through its own LayerNorm (learned affine
        parameters, initialised to the identity), then concatenation, sum, softmax-weighted sum, per-space
        ``Linear -> Tanh`` then sum, or self-attention across the spaces then sum.
    anchors : (m, d) tensor, optional
        Held as a buffer; or pass anchors to ``forward`` (e.g. another encoder's parallel anchors).
    num_anchors : int, optional
        Needed when ``anchors`` is not given (the aggregation has parameters per anchor).
    center : bool
        Passed to every relative projection.
    similarity_options : {name: {option: value}}, optional

    ``out_features``: the output width, ``m * len(similarities)`` for concat, ``m`` otherwise.
    """

    def __init__(
        self,
        similarities: Sequence[str] = DEFAULT_SIMILARITIES,
        aggregation: str = "concat",
        *,
        anchors: torch.Tensor | None = None,
        num_anchors: int | None = None,
        center: bool = False,
        similarity_options: Mapping[str, Mapping[str, Any]] | None = None,
    ):
        super().__init__(anchors, num_anchors, "none")
        self.similarities = _check_similarities(similarities)
        if self.num_anchors is None:
            raise ValueError("num_anchors: the aggregation has parameters per anchor; give num_anchors or anchors")
        self.center = center
        self.similarity_options = dict(_check_options(self.similarities, similarity_options))
        self.aggregate = SpaceAggregation(self.num_anchors, len(self.similarities), aggregation)

    @property
    def out_features(self) -> int:
        return self.aggregate.out_features

    def spaces(self, x: torch.Tensor, anchors: torch.Tensor | None = None) -> list[torch.Tensor]:
        """The relative spaces before aggregation, one per similarity."""
        x = as_float_tensor(x, "x", ndim=2, finite=False)
        anchors = self._anchors_for(x, anchors)
        return _spaces(x, anchors, self.similarities, self.center, self.similarity_options)

    def forward(self, x: torch.Tensor, anchors: torch.Tensor | None = None) -> torch.Tensor:
        return self.aggregate(self.spaces(x, anchors))

    def extra_repr(self) -> str:
        return f"similarities={list(self.similarities)}, num_anchors={self.num_anchors}"
