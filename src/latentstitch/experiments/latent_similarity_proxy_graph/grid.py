"""The grid of GCN runs, each trained full batch, recording after every epoch its validation accuracy and the
relative representation of every node (cosine to the anchor nodes).

The paper's grid varies the optimiser (Adam, plain SGD) at learning rates 0.01 / 0.02; so does this one. Full batch,
an epoch is one step. On row-sum-normalised bag-of-words features (the paper's NormalizeFeatures) plain SGD does not
learn this graph in 50 steps at either rate, with or without momentum (``scripts/probe_graph_sgd.py``), and the
previous runs replaced it by RMSprop. The cause is the features' scale: a BBC article has ~80
of its 1,500 words, so a row-sum entry is ~0.012 (Cora's, ~18 words of 1,433: ~0.055), the first layer's outputs
are tiny, the LayerNorm of the head divides their gradient up and the zero-initialised biases' steps swamp the
weights'. On the binary features (each entry 0 or 1) the same SGD at 0.01 and 0.02 trains, so the grid keeps the
paper's optimisers and uses binary features.
"""

from __future__ import annotations

import itertools

import torch

from latentstitch.experiments.latent_similarity_proxy_graph.graph import GraphTensors
from latentstitch.models import GCNClassifier, node_classification_loss
from latentstitch.relative import relative_projection
from latentstitch.similarity import matched_cosine
from latentstitch.training import fit


def grid(axes: dict[str, tuple]) -> list[dict]:
    """One run per combination of the ``axes`` values (``Config.grid``), in ``itertools.product`` order."""
    return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]


def make_optimizer(name: str, lr: float, parameters, momentum: float = 0.0) -> torch.optim.Optimizer:
    """The paper's optimisers: ``adam`` (torch's defaults) or plain ``sgd`` (``momentum`` 0), at ``lr``."""
    if name == "adam":
        return torch.optim.Adam(parameters, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=lr, momentum=momentum)
    raise ValueError(f"optimizer: expected 'adam' or 'sgd', got {name!r}")


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
        optimizer=make_optimizer(
            config["optimizer"], config["lr"], model.parameters(), momentum=config.get("momentum", 0.0)
        ),
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
