"""The torch module behind a packaged encoder, for forward hooks on its layers (``similarity.layer_similarity``,
``stitching.get_activations``): ``torch_model(encoder)`` gives the module and the function that turns a batch of
the encoder's inputs (texts, images) into the module's inputs.

paraphrase-MiniLM-L3 ships as an ONNX graph, which has no modules to hook: its weights are read into a Hugging Face
``BertModel`` of the same shape (every matrix found by the bias its product feeds), which reproduces the graph's
outputs. e5-small (a C engine) and the Universal Sentence Encoder (numpy) have no torch module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from latentstitch._core.extras import require
from latentstitch.encoders._base import Encoder
from latentstitch.encoders._text import ParaphraseMiniLML3Encoder, TransformersEncoder
from latentstitch.encoders._vision import EfficientNetLiteEncoder

_ONNX_PREFIX = "model.0.auto_model."
# paraphrase-MiniLM-L3-v2's configuration (sentence-transformers' config.json; the head count is not in the weights).
_L3_CONFIG = {
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 3,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "hidden_act": "gelu",
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
}


def torch_model(encoder: Encoder) -> tuple[nn.Module, Callable[[Any], Any]]:
    """``(module, prepare)``: the encoder's torch module and ``prepare(batch)``, a batch of the encoder's inputs (a
    list of texts, an (N, C, H, W) image array) as the module's inputs (a mapping of tensors with the attention
    mask, or an image tensor). An encoder without a torch module is an error naming it."""
    if isinstance(encoder, TransformersEncoder):

        def tokens(texts: list[str]) -> dict[str, torch.Tensor]:
            return dict(
                encoder.tokenizer(
                    list(texts), padding=True, truncation=True, max_length=encoder.max_length, return_tensors="pt"
                )
            )

        return encoder.model, tokens
    if isinstance(encoder, ParaphraseMiniLML3Encoder):

        def l3_tokens(texts: list[str]) -> dict[str, torch.Tensor]:
            return {key: torch.from_numpy(value) for key, value in encoder.tokenize(list(texts)).items()}

        return bert_from_onnx(encoder._model_path), l3_tokens
    if isinstance(encoder, EfficientNetLiteEncoder):
        return encoder.model, encoder.preprocess
    raise ValueError(
        f"encoder: {encoder.name} runs without torch modules (no layers to hook); layer-wise comparisons support "
        "minilm-l6, paraphrase-minilm-l3, efficientnet-lite0, efficientnet-lite1 and Hugging Face model folders"
    )


def bert_from_onnx(path: str) -> nn.Module:
    """A Hugging Face ``BertModel`` holding the weights of paraphrase-MiniLM-L3-v2's ONNX graph (eval mode)."""
    onnx = require("onnx", "text")
    transformers = require("transformers", "text")
    from onnx import numpy_helper

    graph = onnx.load(path).graph
    weights = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    state = {name.removeprefix(_ONNX_PREFIX): value for name, value in weights.items() if name.startswith(_ONNX_PREFIX)}
    # The graph's matrices are unnamed MatMul inputs (x @ W): each is named after the bias added to its product.
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights or node.input[1].startswith(_ONNX_PREFIX):
            continue
        biases = [
            name
            for add in consumers.get(node.output[0], [])
            if add.op_type == "Add"
            for name in add.input
            if name.startswith(_ONNX_PREFIX) and name.endswith(".bias")
        ]
        if len(biases) != 1:
            raise ValueError(f"path: {path}: cannot tell which layer the matrix {node.input[1]} belongs to")
        state[biases[0].removeprefix(_ONNX_PREFIX).removesuffix(".bias") + ".weight"] = weights[node.input[1]].T
    model = transformers.BertModel(transformers.BertConfig(**_L3_CONFIG), add_pooling_layer=False)
    tensors = {name: torch.from_numpy(np.array(value)) for name, value in state.items()}  # writable copies
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    missing = [name for name in missing if not name.endswith("position_ids")]
    if missing or unexpected:
        raise ValueError(
            f"path: {path}: the ONNX weights do not fill a BertModel (missing {missing}, extra {unexpected})"
        )
    return model.eval()
