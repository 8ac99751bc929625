"""latentstitch: make the latent spaces of independently trained networks talk to each other.

Folders by concept:
- ``latentstitch.relative``: relative representations (similarity to anchors), anchor selection, torch layers.
- ``latentstitch.stitching``: stitching layers fitted by direct matching (least squares, Procrustes, reduced rank,
  L1) and latent translation.
- ``latentstitch.alignment``: alignment from few or no parallel pairs (inverse relative projection, bootstrapped
  anchors, unpaired alignment, generalised Procrustes over many models, latent functional maps).
- ``latentstitch.similarity``: similarity indices (CKA, CCA family, Procrustes, RSA, neighbourhood agreement).
- ``latentstitch.bridge``: a checked bridge from a new model's embeddings to an old model's (``Bridge``), chosen
  by cross-validation on parallel anchors; ``latentstitch.embeddings`` reads and writes users' embedding files.
- ``latentstitch.invariance``: the transformations latent spaces are compared under.
- ``latentstitch.models``, ``latentstitch.losses``, ``latentstitch.training``: models with absolute or relative
  latents, topological densification, the training loop.
- ``latentstitch.data``, ``latentstitch.encoders``: real datasets and pretrained encoders that install from the
  package registries (optional extras).
- ``latentstitch.experiments``: the demo and the paper reproductions (``latentstitch reproduce --list``).

The names users type most are re-exported here.
"""

from typing import TYPE_CHECKING

from latentstitch._version import __version__

# The names are imported on first use (PEP 562), so that ``import latentstitch.cli`` (which imports this package
# first) and ``latentstitch --help`` do not load torch and the math: ``from latentstitch import Bridge`` works as
# before. Name -> the module that defines it.
_LAZY = {
    "alignment": "latentstitch.alignment",
    "invariance": "latentstitch.invariance",
    "relative": "latentstitch.relative",
    "similarity": "latentstitch.similarity",
    "stitching": "latentstitch.stitching",
    "Bridge": "latentstitch.bridge",
    **dict.fromkeys(
        [
            "Centering",
            "L2Normalization",
            "RelativeProjection",
            "RobustRelativeProjection",
            "StandardScaling",
            "relative_projection",
            "select_anchors",
        ],
        "latentstitch.relative",
    ),
    **dict.fromkeys(["cka", "compare", "pairwise", "pairwise_test"], "latentstitch.similarity"),
    **dict.fromkeys(
        ["LatentTranslator", "LeastSquares", "Procrustes", "ReducedRank", "SparseLasso"], "latentstitch.stitching"
    ),
}

if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from latentstitch import alignment, invariance, relative, similarity, stitching
    from latentstitch.bridge import Bridge
    from latentstitch.relative import (
        Centering,
        L2Normalization,
        RelativeProjection,
        RobustRelativeProjection,
        StandardScaling,
        relative_projection,
        select_anchors,
    )
    from latentstitch.similarity import cka, compare, pairwise, pairwise_test
    from latentstitch.stitching import LatentTranslator, LeastSquares, Procrustes, ReducedRank, SparseLasso


def __getattr__(name: str):
    import importlib

    if name not in _LAZY:
        raise AttributeError(f"module 'latentstitch' has no attribute {name!r}")
    module = importlib.import_module(_LAZY[name])
    value = module if module.__name__ == f"latentstitch.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Bridge",
    "Centering",
    "L2Normalization",
    "LatentTranslator",
    "LeastSquares",
    "Procrustes",
    "ReducedRank",
    "RelativeProjection",
    "RobustRelativeProjection",
    "SparseLasso",
    "StandardScaling",
    "__version__",
    "alignment",
    "cka",
    "compare",
    "invariance",
    "pairwise",
    "pairwise_test",
    "relative",
    "relative_projection",
    "select_anchors",
    "similarity",
    "stitching",
]
