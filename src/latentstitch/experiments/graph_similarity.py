"""Latent similarity as a label-free proxy of performance, on a real graph (Moschella et al., ICLR 2023, Cora).

A grid of graph convolutional networks (seeds, epochs, depth, width, dropout, optimiser, learning rate) is trained
for node classification. After every epoch, the node embeddings are turned into relative representations with
respect to 300 anchor nodes, and compared with those of the best run (mean cosine over nodes of the matched
relative vectors). The paper reports a Pearson correlation of 0.955 between validation accuracy and this
similarity. Also: node-classification F1 of GCNs with relative vs absolute latents (paper: Cora 0.89 vs 0.90).

The graph is Planetoid Cora when its raw files are found under ``$LATENTSTITCH_PLANETOID_ROOT``; otherwise the
BBC News k-NN document graph (``latentstitch.data.knn_document_graph``: 2,225 article nodes, bag-of-words
features, 5 topics), which has the shape of Cora and installs from the registries.
"""

from __future__ import annotations

import functools
import itertools
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from latentstitch.experiments._grid import map_grid
from latentstitch.experiments._report import Expectation, Report, ResultTable, mean_std, pyplot, save_figure

HELP = "GCN grid: relative-space similarity to the best run vs validation accuracy; relative vs absolute GCN F1"
PAPER = (
    "Moschella et al., Relative representations enable zero-shot latent space communication, ICLR 2023 "
    "(latent similarity vs performance on Cora; graph node classification)"
)
PLANETOID_ENV = "LATENTSTITCH_PLANETOID_ROOT"
NUM_ANCHORS = 300
PAPER_PEARSON = 0.955
PAPER_F1 = {"relative": (0.89, 0.02), "absolute": (0.90, 0.01)}


def load_graph(seed: int = 0):
    """Cora from ``$LATENTSTITCH_PLANETOID_ROOT`` if set, else the BBC News k-NN graph; row-normalised features
    (PyG's NormalizeFeatures) and a random node split: 80% train, 10% validation, 10% test."""
    from latentstitch.data import knn_document_graph, load_planetoid

    root = os.environ.get(PLANETOID_ENV)
    graph = load_planetoid(root, "cora") if root else knn_document_graph(seed=seed)
    labelled = np.flatnonzero(graph.y >= 0)
    order = np.random.default_rng(seed).permutation(labelled)
    n_val = n_test = len(order) // 10
    masks = [np.zeros(graph.num_nodes, dtype=bool) for _ in range(3)]
    masks[1][order[:n_val]] = True
    masks[2][order[n_val : n_val + n_test]] = True
    masks[0][order[n_val + n_test :]] = True
    sums = graph.x.sum(axis=1, keepdims=True)
    x = (graph.x / np.where(sums > 0, sums, 1)).astype(np.float32)
    return replace(graph, x=x, train_mask=masks[0], val_mask=masks[1], test_mask=masks[2])


def grid(quick: bool) -> list[dict]:
    if quick:
        return [
            {"seed": s, "epochs": e, "layers": 2, "hidden": 32, "dropout": 0.5, "optimizer": o, "lr": 0.01}
            for s, e, o in itertools.product((0, 1), (5, 10), ("adam", "sgd"))
        ][:6]
    axes = {
        "seed": (0, 1),
        "epochs": (10, 30, 50),
        "layers": (1, 2),
        "hidden": (32, 128),
        "dropout": (0.1, 0.5),
        "optimizer": ("adam", "sgd"),
        "lr": (0.01,),
    }
    return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]


class _Tensors:
    def __init__(self, graph):
        from latentstitch.models import normalized_adjacency

        self.x = torch.from_numpy(graph.x)
        self.y = torch.from_numpy(graph.y)
        self.adjacency = normalized_adjacency(torch.from_numpy(graph.edge_index), graph.num_nodes)
        self.masks = {name: torch.from_numpy(getattr(graph, f"{name}_mask")) for name in ("train", "val", "test")}


def train_run(config: dict, data: _Tensors, num_classes: int, anchors: torch.Tensor, on_epoch) -> torch.nn.Module:
    """Train one grid configuration with ``fit`` (full batch); ``on_epoch(epoch, val_accuracy, relative)`` is
    called after every epoch with the relative representation of all nodes (eval mode)."""
    from latentstitch.models import GCNClassifier, node_classification_loss
    from latentstitch.relative import relative_projection
    from latentstitch.training import fit

    torch.manual_seed(config["seed"])
    model = GCNClassifier(
        data.x.shape[1], num_classes, hidden=config["hidden"], layers=config["layers"], dropout=config["dropout"]
    )
    optimizer = (
        torch.optim.Adam(model.parameters(), lr=config["lr"])
        if config["optimizer"] == "adam"
        else torch.optim.SGD(model.parameters(), lr=config["lr"])
    )

    def evaluate(model):
        z = model.embed(data.x, data.adjacency)
        logits = model.decode(z)  # an absolute network: its latents are its embeddings
        val = data.masks["val"]
        accuracy = float((logits[val].argmax(dim=1) == data.y[val]).float().mean())
        on_epoch(accuracy, relative_projection(z, z[anchors], eps=1e-12))
        return {"val_accuracy": accuracy}

    fit(
        model,
        node_classification_loss,
        [(data.x, data.adjacency, data.y, data.masks["train"])],
        epochs=config["epochs"],
        optimizer=optimizer,
        seed=config["seed"],
        evaluate=evaluate,
        progress=False,
    )
    return model


def final_run(config: dict, *, data: _Tensors, num_classes: int, anchors: torch.Tensor) -> tuple[float, torch.Tensor]:
    """One grid run: its final validation accuracy and relative representation of all nodes."""
    last: dict = {}
    train_run(config, data, num_classes, anchors, lambda a, r: last.update(acc=a, r=r))
    return last["acc"], last["r"]


def trajectory_run(
    config: dict, *, data: _Tensors, num_classes: int, anchors: torch.Tensor, reference: torch.Tensor
) -> dict:
    """One grid run again, with every epoch's validation accuracy and similarity to ``reference``."""
    points: dict[str, list[float]] = {"val_accuracy": [], "similarity": []}

    def record(accuracy, r):
        points["val_accuracy"].append(accuracy)
        points["similarity"].append(matched_similarity(r, reference))

    train_run(config, data, num_classes, anchors, record)
    return {"config": config, **points}


def matched_similarity(r: torch.Tensor, reference: torch.Tensor) -> float:
    """Mean over nodes of the cosine between a node's relative vector and the reference's (methods §1)."""
    from latentstitch.similarity import matched_cosine

    return float(matched_cosine(r, reference))


def node_classification(data: _Tensors, num_classes: int, anchors: torch.Tensor, seeds: list[int], epochs: int):
    """Test macro-F1 of a 2-layer GCN (hidden 64, dropout 0.5, Adam 0.01) with absolute vs relative latents."""
    from latentstitch.experiments._text import macro_f1
    from latentstitch.models import GCNClassifier, node_classification_loss
    from latentstitch.training import fit

    scores: dict[str, list[dict[str, float]]] = {"absolute": [], "relative": []}
    test = data.masks["test"]
    for seed in seeds:
        for kind in scores:
            torch.manual_seed(seed)
            model = GCNClassifier(
                data.x.shape[1],
                num_classes,
                hidden=64,
                layers=2,
                dropout=0.5,
                anchor_nodes=anchors if kind == "relative" else None,
            )
            fit(
                model,
                node_classification_loss,
                [(data.x, data.adjacency, data.y, data.masks["train"])],
                epochs=epochs,
                lr=0.01,
                seed=seed,
                progress=False,
            )
            with torch.no_grad():
                predicted = model(data.x, data.adjacency)[test].argmax(dim=1).numpy()
            truth = data.y[test].numpy()
            scores[kind].append(
                {"macro_f1": macro_f1(truth, predicted), "accuracy": float(np.mean(predicted == truth))}
            )
    return scores


def run(*, quick: bool, out_dir: Path, progress: bool) -> Report:
    from rich.progress import Progress
    from scipy.stats import pearsonr

    started = time.perf_counter()
    graph = load_graph(seed=0)
    data = _Tensors(graph)
    train_nodes = np.flatnonzero(graph.train_mask)
    anchors = torch.as_tensor(np.sort(np.random.default_rng(0).choice(train_nodes, NUM_ANCHORS, replace=False)))
    configs = grid(quick)

    # Pass 1: every run's final validation accuracy and relative representation; the best run is the reference.
    # Each run is independent: map_grid runs them here, or as tasks on a Dask cluster (reproduce --workers N).
    finals = map_grid(
        functools.partial(final_run, data=data, num_classes=graph.num_classes, anchors=anchors),
        configs,
        progress=progress,
        description="GCN grid, pass 1 (find the best run)",
    )
    best = int(np.argmax([acc for acc, _ in finals]))
    reference = finals[best][1]
    # Pass 2: the same runs again (same seeds, bit-identical on a CPU), now with every epoch's similarity.
    trajectories = map_grid(
        functools.partial(
            trajectory_run, data=data, num_classes=graph.num_classes, anchors=anchors, reference=reference
        ),
        configs,
        progress=progress,
        description="GCN grid, pass 2 (similarity per epoch)",
    )
    with Progress(disable=not progress, transient=True) as bar:
        bar.add_task("node classification, relative vs absolute GCN", total=None)
        nc_seeds = [0] if quick else [0, 1, 2, 3, 4]
        scores = node_classification(data, graph.num_classes, anchors, nc_seeds, 20 if quick else 200)

    per_run = []
    per_optimizer: dict[str, list[float]] = {}
    for t in trajectories:
        acc, sim = np.asarray(t["val_accuracy"]), np.asarray(t["similarity"])
        if len(acc) > 2 and acc.std() > 0 and sim.std() > 0:
            per_run.append(float(pearsonr(acc, sim).statistic))
            per_optimizer.setdefault(t["config"]["optimizer"], []).append(per_run[-1])
    final_acc = np.asarray([t["val_accuracy"][-1] for t in trajectories])
    final_sim = np.asarray([t["similarity"][-1] for t in trajectories])
    across_runs = float(pearsonr(final_acc, final_sim).statistic)
    all_acc = np.concatenate([t["val_accuracy"] for t in trajectories])
    all_sim = np.concatenate([t["similarity"] for t in trajectories])
    pooled = float(pearsonr(all_acc, all_sim).statistic)
    mean_per_run = float(np.mean(per_run)) if per_run else float("nan")

    correlation = ResultTable(
        f"Pearson r between validation accuracy and similarity to the best run ({len(configs)} GCN runs)",
        ["correlation", "ours", "paper"],
        [
            ["per run over its epochs, mean over runs (the paper's score)", mean_per_run, PAPER_PEARSON],
            *(
                [f"per run over its epochs, {name} runs only ({len(values)})", float(np.mean(values)), None]
                for name, values in sorted(per_optimizer.items())
            ),
            ["across runs, final epoch (one point per run)", across_runs, None],
            ["pooled over every (run, epoch)", pooled, None],
        ],
        note=(
            f"{len(per_run)} of {len(configs)} runs have a defined per-run correlation (constant accuracy or "
            "similarity over the epochs gives none). Paper: ~2,000 GCN2/GIN models on Cora; its value is recalled "
            "from the paper, low confidence (methods §1)."
        ),
    )
    f1 = ResultTable(
        f"Node classification on {graph.name}: test macro-F1, 2-layer GCN, absolute vs relative latents",
        ["latent space", "macro-F1", "accuracy", "paper F1 (Cora)"],
        [
            [
                kind,
                mean_std([s["macro_f1"] for s in scores[kind]]),
                mean_std([s["accuracy"] for s in scores[kind]]),
                PAPER_F1[kind],
            ]
            for kind in ("relative", "absolute")
        ],
        note=f"mean ± std over seeds {nc_seeds}; relative: cosine to {NUM_ANCHORS} anchor nodes, LayerNorm + Linear",
    )
    rel_f1 = float(np.mean([s["macro_f1"] for s in scores["relative"]]))
    abs_f1 = float(np.mean([s["macro_f1"] for s in scores["absolute"]]))
    expectations = [
        Expectation(
            "validation accuracy correlates strongly with similarity to the best run (paper r = 0.955; ours >= 0.8)",
            mean_per_run >= 0.8,
            f"mean per-run r {mean_per_run:.3f}, across runs {across_runs:.3f}, pooled {pooled:.3f}; per run by "
            "optimiser: "
            + ", ".join(f"{name} {np.mean(values):.3f}" for name, values in sorted(per_optimizer.items()))
            + ". Runs that barely learn (accuracy near chance, wandering from epoch to epoch) have no per-run "
            "correlation and pull the mean down",
        ),
        Expectation(
            "relative GCN about as good as absolute (macro-F1 within 0.03; paper 0.89 vs 0.90)",
            abs(rel_f1 - abs_f1) <= 0.03,
            f"relative {rel_f1:.3f}, absolute {abs_f1:.3f}",
        ),
    ]

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figure = out_dir / "similarity_vs_accuracy.png"
    plot_scatter(trajectories, best, mean_per_run, pooled, graph.name, figure)
    cora = bool(os.environ.get(PLANETOID_ENV))
    return Report(
        name="latent-similarity-proxy-graph",
        title="Latent similarity as a proxy of performance: GCN grid on a real graph",
        paper=PAPER,
        setting={
            "graph": (
                f"{graph.name}: {graph.num_nodes} nodes, {graph.num_edges // 2} undirected edges, "
                f"{graph.x.shape[1]} features (row-normalised), {graph.num_classes} classes"
            ),
            "split": "random nodes: 80% train, 10% validation, 10% test (seed 0)",
            "anchors": f"{NUM_ANCHORS} random training nodes; relative = cosine of node embeddings to theirs",
            "grid": (
                f"{len(configs)} runs: "
                + ", ".join(f"{k} {sorted({c[k] for c in configs})}" for k in configs[0])
                + "; GCNClassifier (GCN layers, ReLU, dropout; LayerNorm + Linear head), full batch, fit"
            ),
            "similarity": "mean over all nodes of cos(r_run,epoch(v), r_best(v)); best = highest final val accuracy",
            "node classification": "2-layer GCN, hidden 64, dropout 0.5, Adam 0.01, "
            f"{20 if quick else 200} epochs, seeds {nc_seeds}",
        },
        differences=[
            (
                "Planetoid Cora (from $LATENTSTITCH_PLANETOID_ROOT)"
                if cora
                else "the BBC News k-NN document graph "
                "(real articles, TF-IDF 10-NN edges, bag-of-words features, 5 topics) instead of Cora, which ships "
                f"in no registry package (set ${PLANETOID_ENV} to a folder with the Planetoid raw files to run on Cora)"
            ),
            f"{len(configs)} runs instead of ~2,000; plain GCN layers (1-2, ReLU) instead of GCN2Conv/GIN stacks of "
            "32-64 layers; the grid varies width instead of activation, and the learning rate is 0.01 only",
            "the paper's network is absolute (a linear layer, GCN2/GIN stack, linear, L2 norm); here the relative "
            "representation is taken of the last GCN layer's output, before the LayerNorm + Linear head",
            "node-classification F1 is macro-F1 on a 10% random test split (the paper does not state its split)",
        ],
        tables=[correlation, f1],
        expectations=expectations,
        figures={"validation accuracy vs similarity to the best run": str(figure)},
        numbers={
            "per_run_pearson": per_run,
            "per_run_pearson_by_optimizer": per_optimizer,
            "mean_per_run_pearson": mean_per_run,
            "across_runs_pearson": across_runs,
            "pooled_pearson": pooled,
            "best_run": configs[best],
            "trajectories": trajectories,
            "node_classification": scores,
        },
        seconds=time.perf_counter() - started,
    )


def plot_scatter(trajectories, best: int, mean_per_run: float, pooled: float, name: str, path: Path) -> None:
    plt = pyplot()

    figure, ax = plt.subplots(figsize=(7.5, 5.5))
    for optimizer, marker in (("adam", "o"), ("sgd", "^")):
        chosen = [t for t in trajectories if t["config"]["optimizer"] == optimizer]
        if not chosen:
            continue
        sim = np.concatenate([t["similarity"] for t in chosen])
        acc = np.concatenate([t["val_accuracy"] for t in chosen])
        epoch = np.concatenate([np.arange(1, len(t["similarity"]) + 1) for t in chosen])
        points = ax.scatter(sim, acc, c=epoch, cmap="viridis", marker=marker, s=9, alpha=0.6, label=optimizer)
    reference = trajectories[best]
    ax.scatter(
        reference["similarity"][-1], reference["val_accuracy"][-1], marker="*", s=220, color="red", label="best run"
    )
    figure.colorbar(points, ax=ax, label="epoch")
    ax.set_xlabel("similarity to the best run (mean cosine of matched relative vectors)")
    ax.set_ylabel("validation accuracy")
    ax.set_title(
        f"{name}: every epoch of {len(trajectories)} GCN runs\n"
        f"Pearson r: {mean_per_run:.3f} per run (mean), {pooled:.3f} pooled"
    )
    ax.legend(title="optimiser", loc="lower right")
    figure.tight_layout()
    save_figure(figure, path, dpi=100)
