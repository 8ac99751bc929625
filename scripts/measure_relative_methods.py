"""Measure the relative-representation methods of issue 20 against plain cosine on real encoder pairs.

One command (about an hour on one thread of the 2-core machine, 2 seeds; ``--quick`` runs a small version in
about 5 minutes):

    nice -n 10 .venv/bin/python scripts/measure_relative_methods.py --out results/relative-methods

Sections, each written to ``OUT/results.json`` as soon as it is done, and summarised in ``OUT/results.md``:

1. ``stitching_bbc`` and ``stitching_efficientnet``: zero-shot stitched accuracy of every method against plain
   cosine relative projection on the same pair, mean of both directions: the six BBC News pairs of MiniLM-L6,
   MiniLM-L3, USE-m3 and e5-small (cached embeddings, ``experiments._text.bbc_task(1200, 500)``, 300 random anchors,
   the relreps text head, Adam 1e-3, 20 epochs) and the EfficientNet-lite0/lite1 pair on Fashion-MNIST (cached,
   2000 / 1000 images, 768 anchors, the vision head, Adam 1e-4, 10 epochs). Every frozen method's vectors are
   L2-normalised before the head; the learned ones (mlp aggregator, prototypes) are trained with it.
2. ``retrieval``: cross-space retrieval (top-1, MRR) of the BBC test articles from their relative vectors, plain vs
   ``top_k`` / ``power`` (ASIF) and the other similarities.
3. ``swiss_roll``: geodesic vs cosine / euclidean when the second space is the first one unrolled (an isometry of
   the manifold that bends it).
4. ``sentence_layers``: multi-layer relative representations of MiniLM-L6 (7 hidden states) and MiniLM-L3 (4):
   a head on one encoder's layers read zero-shot from the other's, against the last layer alone.
5. ``tiny10``: two Tiny-10s (seeds 0, 1) on Fashion-MNIST stitched at several layers at once (a sandwich
   A -> B -> A) with least-squares and relative connectors, and multi-layer relative representations of the two.
6. ``anchor_study``: ``anchor_study`` on MiniLM-L6 vs USE-m3 (BBC News), English Bible verses as out-of-domain
   anchors, with its plot.

The option grids (top_k, power, shrinkage, neighbours) were fixed before any result was seen; nothing is tuned on
the test splits.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from latentstitch import relative_projection
from latentstitch._core.provenance import with_provenance
from latentstitch.experiments.tasks import SHORT_NAMES, bbc_task, embed, predict, train_head
from latentstitch.models import stitching_head
from latentstitch.relative import (
    LearnedAnchors,
    ProductOfInvariances,
    multilayer_relative_projection,
    product_of_invariances,
    select_anchors,
)
from latentstitch.training import anchor_study

TEXT_ENCODERS = ("minilm-l6", "paraphrase-minilm-l3", "use-m3", "e5-small")
VISION_ENCODERS = ("efficientnet-lite0", "efficientnet-lite1")
ASIF = ((None, 4.0), (100, 1.0), (50, 8.0))  # (top_k, power) options measured


def frozen_methods(vision: bool) -> dict:
    """name -> features(x, space) for the parameter-free methods; ``space`` holds the anchors and training set."""

    def sparse(top_k, power):
        def features(x, s):  # top_k at most the number of anchors (the quick run has fewer)
            k = None if top_k is None else min(top_k, len(s["anchors"]))
            return relative_projection(x, s["anchors"], top_k=k, power=power)

        return features

    methods = {
        "cosine (baseline)": lambda x, s: relative_projection(x, s["anchors"]),
        "cosine, centred": lambda x, s: relative_projection(x, s["anchors"], center=True),
    }
    for top_k, power in ASIF:
        methods[f"ASIF top_k={top_k}, power={power:g}"] = sparse(top_k, power)
    methods.update(
        {
            "geodesic (k=10, train set in the graph)": lambda x, s: relative_projection(
                x, s["anchors"], "geodesic", n_neighbors=10, graph_points=s["train"]
            ),
            "whitened (anchors' span)": lambda x, s: relative_projection(x, s["anchors"], "whitened", cosine=True),
            "whitened, shrinkage 0.1": lambda x, s: relative_projection(
                x, s["anchors"], "whitened", cosine=True, shrinkage=0.1
            ),
            "product of invariances, concat": lambda x, s: product_of_invariances(x, s["anchors"]),
            "product of invariances, sum": lambda x, s: product_of_invariances(x, s["anchors"], aggregation="sum"),
        }
    )
    return methods


class LearnedFeatures(nn.Module):
    """A learned representation followed by the relreps head, trained together."""

    def __init__(self, kind: str, space: dict, classes: int, recipe: str, seed: int):
        super().__init__()
        m = space["anchors"].shape[0]
        self.kind = kind
        self.space = space  # the space it is trained on (the training loop calls model(x))
        if kind == "product":
            self.features = ProductOfInvariances(aggregation="mlp", num_anchors=m)
        else:
            self.features = LearnedAnchors.from_kmeans(space["train"], m, seed=seed)
        self.head = stitching_head(self.features.out_features if kind == "product" else m, classes, recipe)

    def forward(self, x: torch.Tensor, space: dict | None = None) -> torch.Tensor:
        space = self.space if space is None else space
        if self.kind == "product":
            z = self.features(x, space["anchors"])
        else:
            z = relative_projection(x, self.features(space["train"]))
        return self.head(z / z.norm(dim=1, keepdim=True).clamp_min(1e-12))


def l2(z: torch.Tensor) -> torch.Tensor:
    return z / z.norm(dim=1, keepdim=True).clamp_min(1e-12)


def accuracy(y: np.ndarray, predicted: np.ndarray) -> float:
    return float(np.mean(predicted == y))


def stitching_grid(name: str, spaces: dict, y_train, y_test, classes, *, recipe, lr, epochs, seeds, quick) -> dict:
    """accuracy[method][(head space, read space)] = mean over seeds."""
    encoders = list(spaces)
    out: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    y_train_t = torch.from_numpy(y_train)
    for method, features in frozen_methods(recipe == "vision").items():
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # whitened: rank-deficient anchors by design here
            z = {
                e: (l2(torch.as_tensor(features(s["train"], s))), l2(torch.as_tensor(features(s["test"], s))))
                for e, s in spaces.items()
            }
        scores: dict[str, list[float]] = {}
        for head_space, seed in itertools.product(encoders, seeds):
            torch.manual_seed(seed)
            head = stitching_head(z[head_space][0].shape[1], classes, recipe)
            train_head(head, z[head_space][0].float(), y_train_t, epochs=epochs, seed=seed, lr=lr)
            for read in encoders:
                scores.setdefault(f"{head_space}|{read}", []).append(
                    accuracy(y_test, predict(head, z[read][1].float()))
                )
        out[method] = {k: float(np.mean(v)) for k, v in scores.items()}
        print(f"  [{name}] {method}: {time.perf_counter() - t0:.0f} s", flush=True)
    for kind, method in (
        ("product", "product of invariances, learned (mlp) aggregator"),
        ("prototypes", "learned prototype anchors (k-means init)"),
    ):
        t0 = time.perf_counter()
        scores = {}
        for head_space, seed in itertools.product(encoders, seeds):
            torch.manual_seed(seed)
            model = LearnedFeatures(kind, spaces[head_space], classes, recipe, seed).double()
            train_head(model, spaces[head_space]["train"], y_train_t, epochs=epochs, seed=seed, lr=lr)
            model.float()
            with torch.no_grad():
                for read in encoders:
                    read_space = {k: v.float() for k, v in spaces[read].items()}
                    predicted = predict(model, read_space["test"], read_space)
                    scores.setdefault(f"{head_space}|{read}", []).append(accuracy(y_test, predicted))
        out[method] = {k: float(np.mean(v)) for k, v in scores.items()}
        print(f"  [{name}] {method}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"  [{name}] grid: {time.perf_counter() - started:.0f} s", flush=True)
    return out


def summarise(grid: dict, encoders: list[str]) -> list[dict]:
    """Per method: stitched accuracy per unordered pair (mean of both directions), its mean over pairs, and the
    difference to the cosine baseline; non-stitched accuracy (mean over encoders)."""
    rows = []
    pairs = list(itertools.combinations(encoders, 2))
    base = grid["cosine (baseline)"]
    for method, acc in grid.items():
        per_pair = {f"{a}|{b}": (acc[f"{a}|{b}"] + acc[f"{b}|{a}"]) / 2 for a, b in pairs}
        base_pair = {f"{a}|{b}": (base[f"{a}|{b}"] + base[f"{b}|{a}"]) / 2 for a, b in pairs}
        stitched = float(np.mean(list(per_pair.values())))
        rows.append(
            {
                "method": method,
                "stitched": stitched,
                "delta_vs_cosine": stitched - float(np.mean(list(base_pair.values()))),
                "pairs_better": int(sum(per_pair[k] > base_pair[k] + 1e-9 for k in per_pair)),
                "pairs": len(pairs),
                "non_stitched": float(np.mean([acc[f"{e}|{e}"] for e in encoders])),
                "per_pair": per_pair,
            }
        )
    return rows


def text_spaces(quick: bool) -> tuple:
    task = bbc_task(200 if quick else 1200, 500)
    encoders = TEXT_ENCODERS[:2] if quick else TEXT_ENCODERS
    cache: dict = {}
    n_train = len(task.y_train)
    anchor_index = select_anchors(np.zeros((n_train, 1)), 60 if quick else 300, "random", seed=0)
    spaces = {}
    for name in encoders:
        x = torch.from_numpy(embed(name, task.texts, progress=False, encoders=cache)).double()
        spaces[name] = {"train": x[:n_train], "test": x[n_train:], "anchors": x[:n_train][anchor_index]}
    return task, spaces, anchor_index


def section_stitching_bbc(quick: bool, seeds) -> dict:
    task, spaces, _ = text_spaces(quick)
    grid = stitching_grid(
        "BBC",
        spaces,
        task.y_train,
        task.y_test,
        task.num_classes,
        recipe="text",
        lr=1e-3,
        epochs=5 if quick else 20,
        seeds=seeds,
        quick=quick,
    )
    return {"grid": grid, "summary": summarise(grid, list(spaces)), "test": len(task.y_test)}


def section_stitching_efficientnet(quick: bool, seeds) -> dict:
    from latentstitch.experiments.cross_architecture_vision import FULL, QUICK, embeddings

    config = QUICK if quick else FULL
    vtask, features = embeddings(config, progress=False)
    index = np.random.default_rng(42).choice(config.n_train, config.anchors, replace=False)
    vspaces = {
        name: {"train": f[0].double(), "test": f[1].double(), "anchors": f[0].double()[index]}
        for name, f in features.items()
    }
    grid = stitching_grid(
        "EfficientNet",
        vspaces,
        vtask.y_train.numpy(),
        vtask.y_test.numpy(),
        vtask.num_classes,
        recipe="vision",
        lr=1e-4,
        epochs=2 if quick else 10,
        seeds=seeds,
        quick=quick,
    )
    return {"grid": grid, "summary": summarise(grid, list(vspaces)), "test": len(vtask.y_test)}


def retrieval_scores(ra: torch.Tensor, rb: torch.Tensor) -> tuple[float, float]:
    sims = l2(ra) @ l2(rb).T
    ranks = (sims > sims.diagonal().unsqueeze(1)).sum(dim=1) + 1
    return float((ranks == 1).double().mean()), float((1.0 / ranks.double()).mean())


def section_retrieval(quick: bool) -> dict:
    task, spaces, _ = text_spaces(quick)
    methods = frozen_methods(False)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method, features in methods.items():
            if method.startswith("product"):
                continue
            rel = {e: torch.as_tensor(features(s["test"], s)) for e, s in spaces.items()}
            top1, mrr = [], []
            for a, b in itertools.permutations(spaces, 2):
                t, r = retrieval_scores(rel[a], rel[b])
                top1.append(t)
                mrr.append(r)
            out[method] = {"top1": float(np.mean(top1)), "mrr": float(np.mean(mrr))}
    return {"bbc_test_articles": len(task.y_test), "chance_top1": 1 / len(task.y_test), "methods": out}


def swiss_roll(n: int, seed: int):
    rng = np.random.default_rng(seed)
    t = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n)
    height = rng.uniform(0, 15, n)
    arc = 0.5 * (t * np.sqrt(1 + t * t) + np.arcsinh(t))
    labels = np.digitize(arc, np.quantile(arc, [0.2, 0.4, 0.6, 0.8]))  # five bands along the roll
    return np.stack([t * np.cos(t), height, t * np.sin(t)], 1), np.stack([arc, height], 1), labels


def roll_features(n_train: int, anchors: np.ndarray) -> dict:
    return {
        "cosine, centred": lambda x, s: relative_projection(x, s[:n_train][anchors], center=True),
        "euclidean": lambda x, s: relative_projection(x, s[:n_train][anchors], "euclidean"),
        "geodesic (k=8)": lambda x, s: relative_projection(
            x, s[:n_train][anchors], "geodesic", n_neighbors=8, graph_points=s[:n_train]
        ),
    }


def section_swiss_roll(quick: bool, seeds) -> dict:
    out: dict[str, list[float]] = {}
    for seed in seeds:
        rolled, flat, y = swiss_roll(600 if quick else 2000, seed)
        n_train = len(y) * 3 // 4
        anchors = np.random.default_rng(seed).choice(n_train, 40, replace=False)
        spaces = {"rolled": torch.from_numpy(rolled), "unrolled": torch.from_numpy(flat)}
        features = roll_features(n_train, anchors)
        for method, f in features.items():
            z = {k: l2(torch.as_tensor(f(v, v))).float() for k, v in spaces.items()}
            scores = []
            for head_space, read in itertools.permutations(spaces, 2):
                torch.manual_seed(seed)
                head = stitching_head(40, 5, "vision")
                train_head(head, z[head_space][:n_train], torch.from_numpy(y[:n_train]), epochs=30, seed=seed, lr=1e-3)
                scores.append(accuracy(y[n_train:], predict(head, z[read][n_train:])))
            out.setdefault(method, []).append(float(np.mean(scores)))
    return {k: {"stitched": float(np.mean(v)), "std": float(np.std(v))} for k, v in out.items()}


def section_sentence_layers(quick: bool, seeds) -> dict:
    from latentstitch.encoders import get_encoder

    task = bbc_task(200 if quick else 1200, 500)
    n_train = len(task.y_train)
    layers = {}
    for name in ("minilm-l6", "paraphrase-minilm-l3"):
        states = get_encoder(name).encode(task.texts, layers=True, cache=True, progress=False)
        layers[name] = [torch.from_numpy(s).double() for s in states]
    # the same relative depths: MiniLM-L6 hidden states 2, 4, 6 and MiniLM-L3 states 1, 2, 3 (0 = embeddings)
    chosen = {"minilm-l6": [2, 4, 6], "paraphrase-minilm-l3": [1, 2, 3]}
    anchor_index = select_anchors(np.zeros((n_train, 1)), 60 if quick else 300, "random", seed=0)
    variants = {"last layer": [-1], "middle + last": [1, 2], "all three": [0, 1, 2]}
    out = {}
    for variant, which in variants.items():
        z = {}
        for name, states in layers.items():
            picked = [states[chosen[name][i]] for i in which]
            train = [s[:n_train] for s in picked]
            anchors = [s[anchor_index] for s in train]
            z[name] = (
                l2(torch.as_tensor(multilayer_relative_projection(train, anchors))).float(),
                l2(torch.as_tensor(multilayer_relative_projection([s[n_train:] for s in picked], anchors))).float(),
            )
        scores = {"stitched": [], "non_stitched": []}
        for seed in seeds:
            for head_space, read in itertools.product(layers, repeat=2):
                torch.manual_seed(seed)
                head = stitching_head(z[head_space][0].shape[1], task.num_classes, "text")
                train_head(head, z[head_space][0], torch.from_numpy(task.y_train), epochs=5 if quick else 20, seed=seed)
                key = "stitched" if head_space != read else "non_stitched"
                scores[key].append(accuracy(task.y_test, predict(head, z[read][1])))
        out[variant] = {k: float(np.mean(v)) for k, v in scores.items()}
    return out


def section_tiny10(quick: bool, seeds) -> dict:
    from latentstitch.data import load_fashion_mnist
    from latentstitch.models import accuracy as model_accuracy
    from latentstitch.models import tiny10, train_classifier
    from latentstitch.stitching import get_activations, stitch_layers

    data = load_fashion_mnist(n_train=1000 if quick else 6000, n_test=500 if quick else 2000, seed=0)
    x_train, y_train = torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)
    x_test, y_test = torch.from_numpy(data.x_test), torch.from_numpy(data.y_test)
    nets = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        net = tiny10(0.5)
        train_classifier(net, x_train, y_train, epochs=2 if quick else 5, batch_size=64, seed=seed)
        nets.append(net.eval())
    base = [model_accuracy(net, x_test, y_test) for net in nets]
    fit_data = x_train[: 500 if quick else 2000]
    routes = {
        "A[:bn3] -> B[bn3:]": ([0, 1], [("bn3", "bn3")]),
        "A[:bn6] -> B[bn6:]": ([0, 1], [("bn6", "bn6")]),
        "A[:bn3] -> B[bn3:bn6] -> A[bn6:]": ([0, 1, 0], [("bn3", "bn3"), ("bn6", "bn6")]),
        "A[:bn2] -> B[bn2:bn4] -> A[bn4:bn7] -> B[bn7:]": (
            [0, 1, 0, 1],
            [("bn2", "bn2"), ("bn4", "bn4"), ("bn7", "bn7")],
        ),
    }
    stitched = {}
    for route, (order, layers) in routes.items():
        for connector in ("least_squares", "relative"):
            accs = []
            for first in (0, 1):  # both directions: start in A or in B
                models = [nets[i if first == 0 else 1 - i] for i in order]
                model = stitch_layers(models, layers, connector, data=fit_data, num_anchors=512, seed=0)
                accs.append(model_accuracy(model, x_test, y_test))
            stitched[f"{route} | {connector}"] = float(np.mean(accs))
    # multi-layer relative representations of the two networks (global-average-pooled feature maps)
    names = ["bn4", "bn6", "bn8"]
    pooled = []
    for net in nets:
        acts = get_activations(net, torch.cat([x_train, x_test]), names)
        pooled.append({k: v.mean(dim=(2, 3)).double() for k, v in acts.items()})
    n_train = len(x_train)
    anchor_index = select_anchors(np.zeros((n_train, 1)), 100, "random", seed=0)
    multi = {}
    for variant, which in {"bn8 only": ["bn8"], "bn6 + bn8": ["bn6", "bn8"], "bn4 + bn6 + bn8": names}.items():
        z = []
        for acts in pooled:
            train = [acts[k][:n_train] for k in which]
            anchors = [t[anchor_index] for t in train]
            z.append(
                (
                    l2(torch.as_tensor(multilayer_relative_projection(train, anchors, center=True))).float(),
                    l2(
                        torch.as_tensor(
                            multilayer_relative_projection([acts[k][n_train:] for k in which], anchors, center=True)
                        )
                    ).float(),
                )
            )
        scores = {"stitched": [], "non_stitched": []}
        for seed in seeds:
            for h, r in itertools.product((0, 1), repeat=2):
                torch.manual_seed(seed)
                head = stitching_head(z[h][0].shape[1], 10, "vision")
                train_head(head, z[h][0], y_train, epochs=10, seed=seed, lr=1e-3)
                scores["stitched" if h != r else "non_stitched"].append(
                    accuracy(y_test.numpy(), predict(head, z[r][1]))
                )
        multi[variant] = {k: float(np.mean(v)) for k, v in scores.items()}
    return {"base_accuracy": base, "stitched_accuracy": stitched, "multilayer_relative": multi}


def section_anchor_study(quick: bool, out: Path, seeds) -> dict:
    from latentstitch.data import bible_verses

    task, spaces, _ = text_spaces(quick)
    pair = ("minilm-l6", "paraphrase-minilm-l3") if quick else ("minilm-l6", "use-m3")
    texts, _, _ = bible_verses({"en": "engWEB2015eb"})
    verses = [
        texts["en"][i] for i in np.random.default_rng(0).choice(len(texts["en"]), 100 if quick else 400, replace=False)
    ]
    cache: dict = {}
    ood = tuple(torch.from_numpy(embed(name, verses, progress=False, encoders=cache)).double() for name in pair)
    a = torch.cat([spaces[pair[0]]["train"], spaces[pair[0]]["test"]])
    b = torch.cat([spaces[pair[1]]["train"], spaces[pair[1]]["test"]])
    y = np.concatenate([task.y_train, task.y_test])
    study = anchor_study(
        a,
        b,
        y,
        n_anchors=(5, 10, 30, 100) if quick else (5, 10, 30, 100, 300),
        out_of_domain=ood,
        seeds=seeds,
        plot=out / "anchor_study.png",
        title=f"BBC News, {SHORT_NAMES[pair[0]]} vs {SHORT_NAMES[pair[1]]}: anchors (out of domain: Bible verses)",
    )
    return {"pair": list(pair), "summary": study.summary(), "markdown": study.to_markdown(), "plot": "anchor_study.png"}


def write_markdown(results: dict, out: Path) -> None:
    lines = ["# Relative-representation methods (issue 20) against plain cosine", ""]
    for key, label in (
        ("stitching_bbc", "BBC News, 6 encoder pairs"),
        ("stitching_efficientnet", "EfficientNet-lite0 <-> lite1"),
    ):
        section = results.get(key)
        if not section:
            continue
        lines += [
            f"## Zero-shot stitched accuracy: {label} ({section['test']} test samples)",
            "",
            "| method | stitched (mean of both directions, mean over pairs) | vs cosine | pairs better | "
            "non-stitched |",
            "|---|---|---|---|---|",
        ]
        for row in section["summary"]:
            lines.append(
                f"| {row['method']} | {row['stitched']:.4f} | {row['delta_vs_cosine']:+.4f} | "
                f"{row['pairs_better']}/{row['pairs']} | {row['non_stitched']:.4f} |"
            )
        lines.append("")
    if "retrieval" in results:
        r = results["retrieval"]
        lines += [
            f"## Cross-space retrieval of the {r['bbc_test_articles']} BBC test articles (mean over ordered "
            f"pairs; chance top-1 {r['chance_top1']:.4f})",
            "",
            "| method | top-1 | MRR |",
            "|---|---|---|",
        ]
        lines += [f"| {m} | {v['top1']:.4f} | {v['mrr']:.4f} |" for m, v in r["methods"].items()]
        lines.append("")
    if "swiss_roll" in results:
        lines += [
            "## Swiss roll: a head on the rolled space reads the unrolled one (and back)",
            "",
            "| similarity | stitched accuracy (5 bands, chance 0.2) |",
            "|---|---|",
        ]
        lines += [f"| {m} | {v['stitched']:.4f} ± {v['std']:.4f} |" for m, v in results["swiss_roll"].items()]
        lines.append("")
    if "sentence_layers" in results:
        lines += [
            "## Multi-layer relative representations: MiniLM-L6 (states 2, 4, 6) <-> MiniLM-L3 (1, 2, 3)",
            "",
            "| layers | stitched | non-stitched |",
            "|---|---|---|",
        ]
        lines += [
            f"| {m} | {v['stitched']:.4f} | {v['non_stitched']:.4f} |" for m, v in results["sentence_layers"].items()
        ]
        lines.append("")
    if "tiny10" in results:
        t = results["tiny10"]
        lines += [
            f"## Two Tiny-10s on Fashion-MNIST (accuracies {t['base_accuracy'][0]:.4f}, "
            f"{t['base_accuracy'][1]:.4f}), stitched at several layers, mean of both directions",
            "",
            "| route | connector | accuracy |",
            "|---|---|---|",
        ]
        for key, value in t["stitched_accuracy"].items():
            route, connector = key.split(" | ")
            lines.append(f"| {route} | {connector} | {value:.4f} |")
        lines += ["", "| multi-layer relative (pooled) | stitched | non-stitched |", "|---|---|---|"]
        lines += [
            f"| {m} | {v['stitched']:.4f} | {v['non_stitched']:.4f} |" for m, v in t["multilayer_relative"].items()
        ]
        lines.append("")
    if "anchor_study" in results:
        a = results["anchor_study"]
        lines += [
            f"## Anchor study: {a['pair'][0]} vs {a['pair'][1]}",
            "",
            a["markdown"],
            "",
            f"![anchor study]({a['plot']})",
            "",
        ]
    command = shlex.join(["python", "scripts/measure_relative_methods.py", *sys.argv[1:]])
    (out / "results.md").write_text(with_provenance("\n".join(lines), command))


SECTIONS = (
    "stitching_bbc",
    "retrieval",
    "swiss_roll",
    "sentence_layers",
    "stitching_efficientnet",
    "anchor_study",
    "tiny10",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out", type=Path, default=Path("latentstitch-results/relative-methods")
    )  # results/: when named
    parser.add_argument("--quick", action="store_true", help="small sizes, minutes")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sections", nargs="*", default=list(SECTIONS), choices=SECTIONS)
    parser.add_argument("--seeds", type=int, nargs="*", default=None, help="default 0 1 (quick: 0)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    seeds = tuple(args.seeds) if args.seeds else ((0,) if args.quick else (0, 1))
    for section in args.sections:
        started = time.perf_counter()
        print(f"{section} ...", flush=True)
        if section == "stitching_bbc":
            results[section] = section_stitching_bbc(args.quick, seeds)
        elif section == "stitching_efficientnet":
            results[section] = section_stitching_efficientnet(args.quick, seeds)
        elif section == "retrieval":
            results[section] = section_retrieval(args.quick)
        elif section == "swiss_roll":
            results[section] = section_swiss_roll(args.quick, seeds)
        elif section == "sentence_layers":
            results[section] = section_sentence_layers(args.quick, seeds)
        elif section == "tiny10":
            results[section] = section_tiny10(args.quick, seeds)
        else:
            results[section] = section_anchor_study(args.quick, args.out, seeds)
        results.setdefault("seconds", {})[section] = round(time.perf_counter() - started, 1)
        path.write_text(json.dumps(results, indent=1) + "\n")
        write_markdown(results, args.out)
        print(f"{section}: {time.perf_counter() - started:.0f} s", flush=True)
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()
