"""Pieces of ``Bridge.fit`` that the command line and the benchmarks use on their own, named here so that code outside
the bridge (``cli/``, ``benchmarks/``) needs no underscore module:

- ``estimate``: the ``QualityEstimate`` (mean and two-stage bootstrap interval) from the per-item hits of the chosen
  route, and of its rivals when the selection score ranked the same items (``SAME_ITEMS``);
- ``scored_folds``: how many cross-validation folds a fit scores (the held-out anchors are capped);
- ``pool_draw``: the rows of a target pool a fit reads (all, or a seeded draw);
- ``hold``: a transform's output with the dead target features held at their constant values.

Users read the same figures from a fitted ``Bridge`` (``estimate_``, ``routes_``, ``dead_features_``).
"""

from latentstitch.bridge._dead import hold
from latentstitch.bridge._estimate import SAME_ITEMS, estimate
from latentstitch.bridge._pool import pool_draw, scored_folds

__all__ = ["SAME_ITEMS", "estimate", "hold", "pool_draw", "scored_folds"]
