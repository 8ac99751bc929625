"""Anchor studies: how the number of anchors and the way they are chosen drive zero-shot stitching on your data.

The relative-representations paper ends on "anchors are key": their number and diversity shape what the relative
space can express. ``anchor_study`` measures it for a pair of spaces holding the same samples (two encoders, two
seeds, two languages): for every selection strategy and number of anchors it trains a linear classifier on one
space's relative vectors and applies it, unchanged, to the other space's (its own parallel anchors), in both
directions.

Protocol (the same for every strategy, so the numbers compare): a stratified train / test split of the samples;
anchors from the training samples (strategies below); relative vectors standardised per sample over the anchors;
a linear softmax classifier trained full-batch with Adam (``epochs`` steps, ``lr``) on one space's training
samples; accuracy on the other space's test samples (stitched) and on its own (non-stitched). Each cell is the
mean over ``seeds`` (anchor choice and classifier initialisation) of the mean of the two directions.

Strategies: ``random``, ``stratified``, ``kmeans``, ``farthest`` (``select_anchors`` on the first space's training
samples; the same samples are the anchors in the second space); ``learned`` (``fit_prototypes``: k-means-initialised
convex prototypes trained jointly with the classifier in the training space, carried to the other space by their
weights); ``out_of_domain`` (random samples of a separate parallel pool, ``out_of_domain=(pool_a, pool_b)``, e.g.
texts or images of other topics embedded by both models).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import ArrayLike, as_float_tensor, check_same_rows, to_numpy
from latentstitch._core.params import check_choice, check_positive, check_positive_int
from latentstitch._core.progress import progress_bar
from latentstitch.relative._aggregation import standardize_rows
from latentstitch.relative._anchors import select_anchors
from latentstitch.relative._projection import relative_projection
from latentstitch.relative._prototypes import fit_prototypes

STUDY_STRATEGIES = ("random", "stratified", "kmeans", "farthest", "learned", "out_of_domain")


@dataclass
class AnchorStudy:
    """The result of ``anchor_study``: one record per (strategy, number of anchors, seed).

    Each record holds ``strategy``, ``n_anchors``, ``seed`` and the test accuracies ``a_to_b`` (classifier trained
    on space A, reading space B), ``b_to_a``, ``a_to_a``, ``b_to_b``, with ``stitched`` = mean of ``a_to_b`` and
    ``b_to_a`` and ``non_stitched`` = mean of ``a_to_a`` and ``b_to_b``.
    """

    records: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> list[dict[str, Any]]:
        """Mean and (population) standard deviation over seeds for every (strategy, n_anchors)."""
        groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for record in self.records:
            groups.setdefault((record["strategy"], record["n_anchors"]), []).append(record)
        out = []
        for (strategy, n), runs in groups.items():
            row: dict[str, Any] = {"strategy": strategy, "n_anchors": n, "runs": len(runs)}
            for key in ("stitched", "non_stitched", "a_to_b", "b_to_a"):
                values = np.array([r[key] for r in runs])
                row[key] = float(values.mean())
                row[f"{key}_std"] = float(values.std())
            out.append(row)
        return out

    def to_markdown(self) -> str:
        lines = [
            "| strategy | anchors | stitched (mean of both directions) | A -> B | B -> A | non-stitched |",
            "|---|---|---|---|---|---|",
        ]
        for row in self.summary():
            lines.append(
                f"| {row['strategy']} | {row['n_anchors']} | {row['stitched']:.3f} ± {row['stitched_std']:.3f} | "
                f"{row['a_to_b']:.3f} | {row['b_to_a']:.3f} | {row['non_stitched']:.3f} |"
            )
        return "\n".join(lines)

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"settings": self.settings, "records": self.records}, indent=1) + "\n")

    def plot(self, path: str | Path, title: str | None = None) -> Path:
        """Two panels against the number of anchors (log scale), one line per strategy with its spread over seeds:
        zero-shot stitched accuracy, and non-stitched accuracy (the ceiling). Written as PNG."""
        from latentstitch._core.figures import pyplot, save_figure

        plt = pyplot()
        summary = self.summary()
        strategies = list(dict.fromkeys(row["strategy"] for row in summary))
        figure, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
        colours = plt.get_cmap("tab10")
        for index, strategy in enumerate(strategies):
            rows = sorted((r for r in summary if r["strategy"] == strategy), key=lambda r: r["n_anchors"])
            n = np.array([r["n_anchors"] for r in rows])
            for axis, key in zip(axes, ("stitched", "non_stitched"), strict=True):
                mean = np.array([r[key] for r in rows])
                spread = np.array([r[f"{key}_std"] for r in rows])
                axis.plot(n, mean, "o-", color=colours(index), label=strategy, linewidth=1.6, markersize=4)
                axis.fill_between(n, mean - spread, mean + spread, color=colours(index), alpha=0.15, linewidth=0)
        chance = self.settings.get("chance")
        counts = sorted({row["n_anchors"] for row in summary})
        for axis, label in zip(
            axes, ("zero-shot stitched (mean of A→B and B→A)", "non-stitched (mean of A→A and B→B)"), strict=True
        ):
            axis.set_xscale("log")
            axis.set_xticks(counts, [str(n) for n in counts])
            axis.minorticks_off()
            axis.set_xlabel("number of anchors")
            axis.set_title(label, fontsize=11)
            axis.grid(alpha=0.3)
            if chance is not None:
                axis.axhline(chance, color="grey", linestyle=":", linewidth=1, label="chance")
        axes[0].set_ylabel("test accuracy")
        axes[1].legend(title="anchor strategy", fontsize=9, loc="center left", bbox_to_anchor=(1.02, 0.5))
        figure.suptitle(title or self.settings.get("title", "anchor study"), fontsize=12)
        figure.tight_layout()
        out = Path(path)
        save_figure(figure, out, dpi=110)
        return out


def _labels(y: ArrayLike, n: int) -> np.ndarray:
    labels = to_numpy(y, "labels") if isinstance(y, torch.Tensor) else np.asarray(y)
    if labels.shape != (n,):
        raise ValueError(f"labels: expected shape ({n},) to match space_a, got {labels.shape}")
    if labels.dtype.kind not in "iub":
        raise TypeError(f"labels: expected integer class labels, got dtype {labels.dtype}")
    return labels.astype(np.int64)


def _train_head(r: torch.Tensor, y: torch.Tensor, classes: int, epochs: int, lr: float, seed: int) -> nn.Linear:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = nn.Linear(r.shape[1], classes).to(r.dtype)
        optimizer = torch.optim.Adam(head.parameters(), lr=lr)
        z = standardize_rows(r)
        for _ in range(epochs):
            optimizer.zero_grad()
            F.cross_entropy(head(z), y).backward()
            optimizer.step()
    return head.eval()


@torch.no_grad()
def _accuracy(head: nn.Linear, r: torch.Tensor, y: torch.Tensor) -> float:
    return float((head(standardize_rows(r)).argmax(dim=1) == y).double().mean())


def anchor_study(
    space_a: ArrayLike,
    space_b: ArrayLike,
    labels: ArrayLike,
    *,
    n_anchors: Sequence[int] = (10, 30, 100, 300),
    strategies: Sequence[str] | None = None,
    out_of_domain: tuple[ArrayLike, ArrayLike] | None = None,
    similarity: str = "cosine",
    seeds: Sequence[int] = (0, 1, 2),
    test_size: float = 0.25,
    epochs: int = 300,
    lr: float = 0.05,
    plot: str | Path | None = None,
    title: str | None = None,
    progress: bool = False,
    **similarity_kwargs: Any,
) -> AnchorStudy:
    """Zero-shot stitched accuracy against the number of anchors, for every anchor selection strategy.

    Parameters
    ----------
    space_a, space_b : (N, d_a), (N, d_b) arrays or tensors
        The same N samples embedded by two models (rows parallel).
    labels : (N,) integer class labels
    n_anchors : sequence of int
        Numbers of anchors to try (each at most the number of training samples, and of out-of-domain samples).
    strategies : sequence of str, optional
        Among ``STUDY_STRATEGIES``; default all of them, ``out_of_domain`` only when ``out_of_domain`` is given.
    out_of_domain : (pool_a, pool_b), optional
        Parallel samples from outside the task, embedded by both models, for the ``out_of_domain`` strategy.
    similarity, **similarity_kwargs
        The relative projection (default cosine).
    seeds : sequence of int
        Each seed draws the anchors and initialises the classifiers.
    test_size : float
        Share of the samples held out (stratified split, fixed seed 0).
    epochs, lr : int, float
        Full-batch Adam steps and learning rate of every classifier (and of the learned prototypes).
    plot : path, optional
        Write ``AnchorStudy.plot`` there.
    title : str, optional
        The plot's title.
    progress : bool
        Show a progress bar.

    Returns
    -------
    AnchorStudy (``summary()``, ``to_markdown()``, ``plot(path)``, ``to_json(path)``).
    """
    from sklearn.model_selection import train_test_split

    a = as_float_tensor(space_a, "space_a", ndim=2, min_rows=4).detach().cpu().double()
    b = as_float_tensor(space_b, "space_b", ndim=2, min_rows=4).detach().cpu().double()
    check_same_rows(a, b, "space_a", "space_b")
    y = _labels(labels, a.shape[0])
    if strategies is None:
        strategies = [s for s in STUDY_STRATEGIES if s != "out_of_domain" or out_of_domain is not None]
    strategies = [check_choice(s, "strategies", STUDY_STRATEGIES) for s in strategies]
    if not strategies:
        raise ValueError("strategies: expected at least one strategy")
    ood = None
    if "out_of_domain" in strategies:
        if out_of_domain is None:
            raise ValueError("out_of_domain: the 'out_of_domain' strategy needs (pool_a, pool_b), parallel samples")
        ood_a = as_float_tensor(out_of_domain[0], "out_of_domain[0]", ndim=2, min_rows=1).detach().cpu().double()
        ood_b = as_float_tensor(out_of_domain[1], "out_of_domain[1]", ndim=2, min_rows=1).detach().cpu().double()
        check_same_rows(ood_a, ood_b, "out_of_domain[0]", "out_of_domain[1]")
        if ood_a.shape[1] != a.shape[1] or ood_b.shape[1] != b.shape[1]:
            raise ValueError("out_of_domain: the pools must have the widths of space_a and space_b")
        ood = (ood_a, ood_b)
    counts = [check_positive_int(n, "n_anchors") for n in n_anchors]
    if not counts:
        raise ValueError("n_anchors: expected at least one number of anchors")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: expected at least one seed")
    epochs = check_positive_int(epochs, "epochs")
    lr = check_positive(lr, "lr")
    if not 0 < test_size < 1:
        raise ValueError(f"test_size: expected a number in (0, 1), got {test_size}")
    train, test = train_test_split(np.arange(len(y)), test_size=test_size, stratify=y, random_state=0)
    largest = max(counts)
    if largest > len(train):
        raise ValueError(f"n_anchors: {largest} anchors exceed the {len(train)} training samples")
    if ood is not None and largest > ood[0].shape[0]:
        raise ValueError(f"n_anchors: {largest} anchors exceed the {ood[0].shape[0]} out-of-domain samples")

    spaces = {"a": a, "b": b}
    y_train, y_test = torch.from_numpy(y[train]), torch.from_numpy(y[test])
    classes = int(y.max()) + 1
    options = dict(similarity_kwargs)
    records = []
    with progress_bar(progress) as bar:
        task = bar.add_task("anchor study", total=len(strategies) * len(counts) * len(seeds)) if bar else None
        for strategy in strategies:
            for n in counts:
                for seed in seeds:
                    heads, anchors = {}, {}
                    if strategy == "learned":
                        for side, x in spaces.items():
                            prototypes, head = fit_prototypes(
                                x[train], y_train, n, similarity=similarity, epochs=epochs, lr=lr, seed=seed, **options
                            )
                            heads[side] = head
                            with torch.no_grad():  # the prototypes in both spaces, from the weights learned here
                                anchors[side] = {s: prototypes(v[train]) for s, v in spaces.items()}
                    else:
                        if strategy == "out_of_domain":
                            index = np.random.default_rng(seed).choice(ood[0].shape[0], size=n, replace=False)
                            chosen = {"a": ood[0][index], "b": ood[1][index]}
                        else:
                            kwargs = {"labels": y[train]} if strategy == "stratified" else {}
                            index = train[select_anchors(a[train], n, strategy, seed=seed, **kwargs)]
                            chosen = {"a": a[index], "b": b[index]}
                        for side, x in spaces.items():
                            r = relative_projection(x[train], chosen[side], similarity, **options)
                            heads[side] = _train_head(r, y_train, classes, epochs, lr, seed)
                            anchors[side] = chosen
                    scores = {}
                    for trained in ("a", "b"):
                        for read in ("a", "b"):
                            r = relative_projection(spaces[read][test], anchors[trained][read], similarity, **options)
                            scores[f"{trained}_to_{read}"] = _accuracy(heads[trained], r, y_test)
                    records.append(
                        {
                            "strategy": strategy,
                            "n_anchors": n,
                            "seed": seed,
                            **scores,
                            "stitched": (scores["a_to_b"] + scores["b_to_a"]) / 2,
                            "non_stitched": (scores["a_to_a"] + scores["b_to_b"]) / 2,
                        }
                    )
                    if bar is not None:
                        bar.update(task, advance=1)
    settings = {
        "similarity": similarity,
        "samples": len(y),
        "train": len(train),
        "test": len(test),
        "classes": classes,
        "chance": float(np.bincount(y[test]).max() / len(test)),
        "epochs": epochs,
        "lr": lr,
        "seeds": seeds,
        "title": title or f"anchor study ({similarity}, {len(train)} training samples)",
    }
    study = AnchorStudy(records, settings)
    if plot is not None:
        study.plot(plot)
    return study
