"""Training every (seed, variant, domain) model of a parallel split and stitching every ordered pair of domains:
encoder, anchors and normalisation statistics of domain A with the head of domain B, on A's test texts."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from latentstitch.data import ParallelSplit
from latentstitch.experiments._text import embed
from latentstitch.experiments.robust_relative.models import VARIANTS, build_model, evaluate, train_model
from latentstitch.models import ZeroShotStitched
from latentstitch.relative import select_anchors


def run_split(
    split: ParallelSplit,
    domains: dict[str, str],
    *,
    seeds: list[int],
    epochs: int,
    pairs: list[tuple[str, str]],
    progress: Any,
    description: str,
    encoders: dict,
) -> dict[str, Any]:
    """``domains``: language -> frozen encoder. Returns every direction's runs per variant (``results``, the same seed
    on both sides: the paper's protocol), the control with the head of another seed (``other_seed``), and the
    number of anchors (= the narrowest latent width, as the paper's 768 anchors for 768-d RoBERTa)."""
    n_train = len(split.y_train)
    x = {
        lang: torch.from_numpy(
            embed(model, split.train[lang] + split.test[lang], progress=bool(progress), encoders=encoders)
        )
        for lang, model in domains.items()
    }
    widths = {lang: v.shape[1] for lang, v in x.items()}
    num_anchors = min(*widths.values(), n_train // 2)
    anchor_index = torch.as_tensor(select_anchors(np.zeros((n_train, 1)), num_anchors, "random", seed=0))
    models = train_models(
        split, x, widths, anchor_index, seeds=seeds, epochs=epochs, progress=progress, description=description
    )
    results, other_seed = stitch_directions(split, x, widths, models, seeds=seeds, pairs=pairs)
    return {
        "results": results,
        "other_seed": other_seed,
        "anchors": num_anchors,
        "domains": domains,
        "test_size": len(split.y_test),
        "classes": list(split.classes),
    }


def train_models(
    split: ParallelSplit,
    x: dict[str, torch.Tensor],
    widths: dict[str, int],
    anchor_index: torch.Tensor,
    *,
    seeds: list[int],
    epochs: int,
    progress: Any,
    description: str,
) -> dict[tuple[int, str, str], torch.nn.Module]:
    """Every (seed, variant, language) model, trained on its language's training embeddings."""
    n_train = len(split.y_train)
    y_train = torch.from_numpy(split.y_train)
    models = {}
    task = progress.add_task(description, total=len(seeds) * len(VARIANTS) * len(x)) if progress else None
    for seed in seeds:
        for variant in VARIANTS:
            for lang in x:
                train_x = x[lang][:n_train]
                model = build_model(variant, widths[lang], train_x[anchor_index], split.num_classes, seed)
                train_model(model, train_x, y_train, variant, epochs=epochs, seed=seed)
                models[seed, variant, lang] = model
                if progress:
                    progress.advance(task)
    return models


def stitch_directions(
    split: ParallelSplit,
    x: dict[str, torch.Tensor],
    widths: dict[str, int],
    models: dict[tuple[int, str, str], torch.nn.Module],
    *,
    seeds: list[int],
    pairs: list[tuple[str, str]],
) -> tuple[dict[str, dict[str, list[dict[str, float]]]], dict[str, dict[str, list[dict[str, float]]]]]:
    """Test scores of every direction A->B (A's encoder, B's head, A's test texts) per variant: with the same seed
    on both sides, and (the control) with the head of another seed."""
    n_train = len(split.y_train)

    def test(a: str, b: str, variant: str, seed_a: int, seed_b: int) -> dict[str, float]:
        model = (
            models[seed_a, variant, a]
            if a == b
            else ZeroShotStitched(models[seed_a, variant, a], models[seed_b, variant, b])
        )
        return evaluate(model, x[a][n_train:], split.y_test)

    directions = sorted({(a, a) for pair in pairs for a in pair} | set(pairs) | {(b, a) for a, b in pairs})
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    other_seed: dict[str, dict[str, list[dict[str, float]]]] = {}
    for a, b in directions:
        key = f"{a}->{b}"
        comparable = {v: v != "absolute" or widths[a] == widths[b] for v in VARIANTS}
        results[key] = {v: [test(a, b, v, s, s) for s in seeds] if comparable[v] else [] for v in VARIANTS}
        if a != b and len(seeds) > 1:
            # Control: the head of the other domain trained from a *different* seed. Same-seed models start from
            # identical weights (adapter and head), which can align the two domains' latents by itself.
            other_seed[key] = {
                v: [test(a, b, v, s, seeds[(i + 1) % len(seeds)]) for i, s in enumerate(seeds)] if comparable[v] else []
                for v in VARIANTS
            }
    return results, other_seed


def stitched_mean(found: dict[str, Any], pair: tuple[str, str], variant: str, metric: str = "accuracy") -> float:
    """Mean over both directions of a pair and the seeds (NaN where undefined)."""
    a, b = pair
    values = [r[metric] for key in (f"{a}->{b}", f"{b}->{a}") for r in found["results"][key][variant]]
    return float(np.mean(values)) if values else float("nan")
