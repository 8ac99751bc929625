"""The paper's patterns, declared once, and our numbers for them."""

from __future__ import annotations

from typing import Any

from latentstitch.experiments._image_tasks import DATASETS
from latentstitch.experiments._report import Pattern, at_least, at_most
from latentstitch.experiments.ae_stitching.config import PAPER_MSE, Config

ABSOLUTE_MIN_RATIO = 20.0  # absolute stitched >= 20x its non-stitched error (the paper: 77-148x)
RELATIVE_MAX_RATIO = 5.0  # relative stitched <= 5x its non-stitched error (the paper: "only 2-5x")
RECONSTRUCTS = 0.5  # a model that reconstructs: at most half the error of the mean training image
RELATIVE_GAIN = 3.0  # relative stitched at least 3x better than absolute stitched (the paper: 19-35x)


def _paper_ratio(model_kind: str, latent: str, key: str) -> str:
    stitched = PAPER_MSE.get((model_kind, latent, "stitched", key))
    own = PAPER_MSE.get((model_kind, latent, "non-stitched", key))
    if stitched is None or own is None:
        return "n/a (our copy of the paper's table lists AE rows only)"
    return f"{stitched[0] / own[0]:.0f}x ({stitched[0]:g} / {own[0]:g})"


def patterns(config: Config) -> list[Pattern]:
    declared = []
    for key in config.sizes:
        name = DATASETS[key]
        for model_kind, latent in config.kinds:
            own = PAPER_MSE.get((model_kind, latent, "non-stitched", key))
            headline = model_kind == "AE"
            declared.append(
                Pattern(
                    f"{key}-{model_kind}-{latent}-reconstructs",
                    f"{name} {model_kind} {latent}: reconstructs far better than the mean training image",
                    f"MSE {own[0]:g} x 10^-3" if own else "n/a",
                    "non-stitched MSE / mean-image MSE",
                    at_most(RECONSTRUCTS, "x"),
                    headline=headline,
                )
            )
            if latent == "absolute":
                claim, rule = f"stitched >= {ABSOLUTE_MIN_RATIO:g}x non-stitched", at_least(ABSOLUTE_MIN_RATIO, "x")
            else:
                claim, rule = f"stitched <= {RELATIVE_MAX_RATIO:g}x non-stitched", at_most(RELATIVE_MAX_RATIO, "x")
            declared.append(
                Pattern(
                    f"{key}-{model_kind}-{latent}-stitching",
                    f"{name} {model_kind} {latent}: {claim}",
                    _paper_ratio(model_kind, latent, key),
                    "stitched MSE / non-stitched MSE",
                    rule,
                    headline=headline and latent == "relative",
                )
            )
        declared.append(
            Pattern(
                f"{key}-AE-relative-fixes-stitching",
                f"{name} AE: relative stitched error far below absolute stitched",
                {"mnist": "35x (97.79 / 2.83)", "fashion-mnist": "19x (120.54 / 6.37)"}[key],
                "absolute stitched MSE / relative stitched MSE",
                at_least(RELATIVE_GAIN, "x"),
                headline=True,
            )
        )
    return declared


def measure(mse: dict[str, Any], baselines: dict[str, float], config: Config) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in config.sizes:
        for model_kind, latent in config.kinds:
            entry = mse[f"{key}/{model_kind}/{latent}"]
            own, crossed = entry["non_stitched_mean_std"][0], entry["stitched_mean_std"][0]
            out[f"{key}-{model_kind}-{latent}-reconstructs"] = (
                own / baselines[key],
                f"non-stitched {own * 1e3:.2f}, mean image {baselines[key] * 1e3:.2f} (x 10^-3)",
            )
            detail = f"stitched {crossed * 1e3:.2f}, non-stitched {own * 1e3:.2f} (x 10^-3)"
            if own >= 0.8 * baselines[key]:
                detail += "; the non-stitched model is no better than the mean image: nothing for stitching to break"
            out[f"{key}-{model_kind}-{latent}-stitching"] = (crossed / own, detail)
        absolute = mse[f"{key}/AE/absolute"]["stitched_mean_std"][0]
        relative = mse[f"{key}/AE/relative"]["stitched_mean_std"][0]
        out[f"{key}-AE-relative-fixes-stitching"] = (
            absolute / relative,
            f"absolute stitched {absolute * 1e3:.2f}, relative stitched {relative * 1e3:.2f} (x 10^-3)",
        )
    return out
