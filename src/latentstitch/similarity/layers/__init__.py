"""Every layer pair of two torch models in one streamed pass: forward hooks and pooling, the moments of all pairs,
their closed-form significance, and the pass over a Dask cluster. Users import the names from
``latentstitch.similarity``."""
