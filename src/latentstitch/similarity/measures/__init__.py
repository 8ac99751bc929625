"""The similarity indices themselves: the registry (``MeasureSpec``, ``get_measure``) and the built-in catalogue
(CKA, the CCA family, GULP, Procrustes, matching, RSA, distance correlation, subspace, PNKA, neighbourhood and
retrieval measures), with the small-sample rules. Users import the names from ``latentstitch.similarity``."""
