"""The moment-based measures chunk by chunk (``update``/``compute``, equal to the one-shot value), minibatch CKA and
the Poisson bootstrap over a stream. Users import the names from ``latentstitch.similarity``."""
