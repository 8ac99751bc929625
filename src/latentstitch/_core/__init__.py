"""The core every concept shares, lowest layer of the package: it imports nothing above it.

Array conversion (``arrays``, ``dtypes``), hyperparameter checks and declared parameter rules (``params``), deferred
device checks and data movement (``device``), scale-safe arithmetic and row norms (``numerics``), errors naming the
argument and row (``errors``), running moments and the least-squares solve on them (``moments``, ``least_squares``),
safetensors/JSON persistence (``persist``), k-NN primitives (``knn``), folds, progress bars, tables, figures and
optional extras. Import from the module that defines a name; this package re-exports nothing.
"""
