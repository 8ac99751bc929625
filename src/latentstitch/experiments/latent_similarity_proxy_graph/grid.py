"""The grid of GCN runs, each trained full batch, recording after every epoch its validation accuracy and the
relative representation of every node (cosine to the anchor nodes).

The paper's grid varies the optimiser (Adam, SGD) at learning rates 0.01 / 0.02. Full batch, an epoch is one step,
and on this graph (row-normalised bag-of-words features) SGD does not learn in 10-50 steps: plain SGD at 0.01 left
chance barely (the previous run: its runs' per-run correlation was noise, -0.05), and with momentum 0.9 a probe
before this run found no learning rate that works (0.2 and 0.5: still at the majority class after 50 steps; 2.0:
diverges). Every run must train, so the second optimiser is RMSprop at 0.01 (adaptive like Adam, with a different
update rule): in the same probe every 10-step run of both optimisers reached 0.49-0.98 validation accuracy.
"""

from __future__ import annotations

import itertools

import torch

from latentstitch.experiments.latent_similarity_proxy_graph.config import OPTIMIZERS
from latentstitch.experiments.latent_similarity_proxy_graph.graph import GraphTensors
from latentstitch.models import GCNClassifier, node_classification_loss
from latentstitch.relative import relative_projection
from latentstitch.similarity import matched_cosine
from latentstitch.training import fit


def grid(axes: dict[str, tuple]) -> list[dict]:
    """One run per combination of the ``axes`` values (``Config.grid``), in ``itertools.product`` order."""
    return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]


def make_optimizer(name: str, parameters) -> torch.optim.Optimizer:
    settings = OPTIMIZERS[name]
    if name == "adam":
        return torch.optim.Adam(parameters, **settings)
    return torch.optim.RMSprop(parameters, **settings)


def train_run(config: dict, data: GraphTensors, num_classes: int, anchors: torch.Tensor, on_epoch) -> torch.nn.Module:
    """Train one grid configuration with ``fit`` (full batch); ``on_epoch(val_accuracy, relative)`` is called after
    every epoch with the relative representation of all nodes (eval mode)."""
    torch.manual_seed(config["seed"])
    model = GCNClassifier(
        data.x.shape[1], num_classes, hidden=config["hidden"], layers=config["layers"], dropout=config["dropout"]
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
        optimizer=make_optimizer(config["optimizer"], model.parameters()),
        seed=config["seed"],
        evaluate=evaluate,
        progress=False,
    )
    return model


def final_run(
    config: dict, *, data: GraphTensors, num_classes: int, anchors: torch.Tensor
) -> tuple[float, torch.Tensor]:
    """One grid run: its final validation accuracy and relative representation of all nodes."""
    last: dict = {}
    train_run(config, data, num_classes, anchors, lambda a, r: last.update(acc=a, r=r))
    return last["acc"], last["r"]


def trajectory_run(
    config: dict, *, data: GraphTensors, num_classes: int, anchors: torch.Tensor, reference: torch.Tensor
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
    return float(matched_cosine(r, reference))
