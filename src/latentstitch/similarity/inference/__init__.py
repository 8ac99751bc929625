"""Whether a similarity is real: permutation tests (drawn nulls, batched null kernels, closed-form nulls),
``pairwise_test`` over many pairs, bootstrap intervals and the seeded resampling behind them. Users import the tests
from ``latentstitch.similarity``; the lower-level pieces that ``permutation_test`` runs (and the benchmarks time) are
named here: ``null_kernel`` (a measure's batched null, ``None`` where none exists), ``batch_size_for`` (permutations
per batch for the widths) and ``Permutations`` (the seeded stream of row permutations)."""

from latentstitch.similarity.inference._null_kernels import batch_size_for, null_kernel
from latentstitch.similarity.inference._resampling import Permutations

__all__ = ["Permutations", "batch_size_for", "null_kernel"]
