"""Shared pieces of the text reproductions: the datasets as the experiments cut them, cached sentence
embeddings, and training / scoring a head on frozen embeddings.

Every experiment that encodes text goes through :func:`embed`, so one run's encodings (safetensors, in the
encoders' cache) serve every later run and every other reproduction that encodes the same texts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from latentstitch.data import load_bbc_news
from latentstitch.encoders import get_encoder
from latentstitch.models import AbsoluteHead, RelativeHead
from latentstitch.training import RandomBatchSampler, TensorBatches, classification_loss, fit

#: Sentence encoders of the text reproductions and their widths (see ``latentstitch.encoders``).
TEXT_ENCODERS = {"minilm-l6": 384, "paraphrase-minilm-l3": 384, "use-m3": 512, "e5-small": 384}
SHORT_NAMES = {
    "minilm-l6": "MiniLM-L6",
    "paraphrase-minilm-l3": "MiniLM-L3",
    "use-m3": "USE-m3",
    "e5-small": "e5-small",
}


@dataclass(frozen=True)
class TextTask:
    """Texts with labels, split into train and test (``texts`` = train then test)."""

    name: str
    train: list[str]
    test: list[str]
    y_train: np.ndarray
    y_test: np.ndarray
    classes: tuple[str, ...]

    @property
    def texts(self) -> list[str]:
        return self.train + self.test

    @property
    def num_classes(self) -> int:
        return len(self.classes)


def bbc_task(n: int, max_chars: int, *, test_size: float = 0.25, seed: int = 0) -> TextTask:
    """A stratified subset of ``n`` BBC News articles, each cut to its first ``max_chars`` characters (title and
    lead), split stratified into train and test."""
    split = load_bbc_news(n=n, test_size=test_size, seed=seed)
    cut = [text[:max_chars] for text in split.x_train], [text[:max_chars] for text in split.x_test]
    return TextTask("bbc-news", cut[0], cut[1], split.y_train, split.y_test, split.classes)


def embed(encoder: str, texts: Sequence[str], *, progress: bool, encoders: dict | None = None) -> np.ndarray:
    """``texts`` encoded by the registered ``encoder``, read from / written to the encoders' safetensors cache.

    Encoders use two threads while encoding (the reproductions train their small heads on one). ``encoders``
    keeps built encoders between calls (a model loads once per run).
    """
    cache = encoders if encoders is not None else {}
    if encoder not in cache:
        cache[encoder] = get_encoder(encoder)
    model = cache[encoder]
    path = model.cache_path(list(texts), cache=True)
    if path is not None and path.exists():
        return model.encode(list(texts), cache=True, progress=False)
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(max(threads, 2))
    try:
        with threadpool_limits(max(threads, 2)):
            return model.encode(list(texts), cache=True, progress=progress)
    finally:
        torch.set_num_threads(threads)


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(y_true, y_pred, average="macro"))


@torch.no_grad()
def predict(model: Callable[..., torch.Tensor], x: torch.Tensor, *args, batch_size: int = 256) -> np.ndarray:
    """Argmax predictions in eval mode, scored in batches of ``batch_size`` (the relreps heads standardise every
    feature over the batch, so the test set is scored batch by batch, as in the official notebooks)."""
    if isinstance(model, nn.Module):
        model.eval()
    starts = list(range(0, len(x), batch_size))
    if len(starts) > 1 and len(x) - starts[-1] < 2:
        starts.pop()  # a last batch of one sample has no batch statistics: it joins the previous batch
    stops = [*starts[1:], len(x)]
    out = [model(x[a:b], *args).argmax(dim=1) for a, b in zip(starts, stops, strict=True)]
    return torch.cat(out).numpy()


def train_head(
    head: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    seed: int,
    lr: float = 1e-3,
    batch_size: int = 32,
) -> nn.Module:
    """The relreps head recipe on frozen embeddings: Adam, cross-entropy, shuffled batches (``fit``); the last
    incomplete batch is dropped (the heads standardise over the batch and need two samples at least)."""
    batches = TensorBatches((x, y), RandomBatchSampler(len(x), batch_size, drop_last=True, seed=seed))
    fit(head, classification_loss, batches, epochs=epochs, lr=lr, seed=seed, progress=False)
    return head.eval()


def score(model: Callable[..., torch.Tensor], x: torch.Tensor, y: np.ndarray, *args) -> dict[str, float]:
    """Macro-F1 and accuracy of ``model(x, *args)`` against the labels ``y``."""
    predicted = predict(model, x, *args)
    return {"macro_f1": macro_f1(y, predicted), "accuracy": float(np.mean(predicted == y))}


def relative_head(
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    anchor_index: np.ndarray,
    num_classes: int,
    *,
    seed: int,
    epochs: int,
    center: bool = False,
) -> nn.Module:
    """A ``RelativeHead`` (text recipe) on the embeddings' cosine similarities to ``x_train[anchor_index]``,
    initialised under ``torch.manual_seed(seed)`` and trained with :func:`train_head`."""
    torch.manual_seed(seed)
    head = RelativeHead(x_train[torch.as_tensor(anchor_index)], num_classes, center=center)
    return train_head(head, x_train, y_train, epochs=epochs, seed=seed)


def absolute_head(x_train: torch.Tensor, y_train: torch.Tensor, num_classes: int, *, seed: int, epochs: int):
    """The same head recipe on the absolute embeddings (``AbsoluteHead``)."""
    torch.manual_seed(seed)
    return train_head(AbsoluteHead(x_train.shape[1], num_classes), x_train, y_train, epochs=epochs, seed=seed)
