"""Whether a similarity is real: permutation tests (drawn nulls, batched null kernels, closed-form nulls),
``pairwise_test`` over many pairs, bootstrap intervals and the seeded resampling behind them. Users import the names
from ``latentstitch.similarity``."""
