"""The MSE table (ours beside the paper's) and the stitched / non-stitched ratio table."""

from __future__ import annotations

from latentstitch.experiments._report import ResultTable
from latentstitch.experiments.ae_stitching.config import PAPER_MSE
from latentstitch.experiments.ae_stitching.patterns import ABSOLUTE_MIN_RATIO, RELATIVE_MAX_RATIO


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
