"""Controls for stitching: what the same stitch achieves when the sender carries no information about the input.

Dr. Frankenstein accuracy alone does not say that two networks share a representation: a flexible enough stitch
trained on the task can reach good accuracy from activations that have nothing to do with the input it is scored
on (Smith et al., ICML 2025). The same stitch is therefore fitted again with the sender's activations replaced by

- ``"shuffled"``: model A's activations of *other* inputs (a random permutation of the samples): the sender's
  marginal distribution is intact, its correspondence with the receiver and the labels is gone;
- ``"noise"``: Gaussian noise with the mean and covariance of A's activations (per channel for feature maps):
  no structure beyond second moments;

and the stitched network, with this null stitching layer, is then evaluated exactly like the real one (on real
activations). "Stitching works here" means the real stitch beats these.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from sklearn.base import clone
from torch import nn

from latentstitch._core.arrays import channels_as_rows
from latentstitch._core.moments import CrossMoments
from latentstitch._core.params import check_choice, check_seed
from latentstitch.stitching._data import in_memory
from latentstitch.stitching._hooks import capture, eval_mode, model_device, resolve_layer
from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._methods import TaskLoss
from latentstitch.stitching._metrics import stitch_metrics
from latentstitch.stitching._model import StitchedModel, stitch
from latentstitch.stitching._task_loss import fit_task_loss

NULLS = ("shuffled", "noise")


def _memory(data: Any, argument: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    memory = in_memory(data)
    if memory is None:
        raise TypeError(
            f"{argument}: stitching nulls permute samples across the whole data set, so they need the data in memory "
            "(an array or an (inputs, labels) tuple), not a loader"
        )
    return memory


class SenderStatistics:
    """Mean and covariance of model A's activations at a layer, per feature (channels of feature maps, features of
    vectors, the last dimension of sequences), and noise drawn with them."""

    def __init__(self, model_a: nn.Module, layer_a: str, inputs: torch.Tensor, batch_size: int):
        moments = CrossMoments(products=("aa",))
        device = model_device(model_a)
        with torch.no_grad(), eval_mode(model_a):
            for start in range(0, len(inputs), batch_size):
                acts = capture(model_a, inputs[start : start + batch_size].to(device), [layer_a])[layer_a]
                moments.update(channels_as_rows(acts, "model_a's activations"))
        if moments.count < 2:
            raise ValueError("data: the noise null needs at least 2 activation rows of model_a")
        self.mean = moments.mean_a
        covariance = moments.centered_aa() / (moments.count - 1)
        eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
        self.root = eigenvectors * eigenvalues.clamp_min(0.0).sqrt()  # noise = mean + z @ root^T

    def noise_like(self, acts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        rows = channels_as_rows(acts, "model_a's activations")
        z = torch.randn(rows.shape, generator=generator, dtype=torch.float64)
        noise = (self.mean.cpu() + z @ self.root.cpu().T).to(device=acts.device, dtype=acts.dtype)
        if acts.ndim == 4:  # rows were (N*H*W, C)
            n, c, h, w = acts.shape
            return noise.reshape(n, h, w, c).permute(0, 3, 1, 2)
        return noise.reshape(acts.shape)


def fit_direct_null(
    stitcher: Any,
    model_a: nn.Module,
    model_b: nn.Module,
    layer_a: str,
    layer_b: str,
    data: Any,
    null: str,
    *,
    seed: int = 0,
    batch_size: int = 256,
    statistics: SenderStatistics | None = None,
) -> Any:
    """Fit a direct-matching stitcher (``partial_fit``) on B's activations paired with a null sender: A's activations
    of permuted inputs (``"shuffled"``) or noise with their mean and covariance (``"noise"``). Returns it fitted."""
    check_choice(null, "null", NULLS)
    resolve_layer(model_a, layer_a, "layer_a")
    resolve_layer(model_b, layer_b, "layer_b")
    inputs, _ = _memory(data, "data")
    generator = torch.Generator().manual_seed(check_seed(seed))
    order = torch.randperm(len(inputs), generator=generator)
    if null == "noise" and statistics is None:
        statistics = SenderStatistics(model_a, layer_a, inputs, batch_size)
    for name in [k for k in vars(stitcher) if k.endswith("_") and not k.startswith("_")]:
        delattr(stitcher, name)
    device_a, device_b = model_device(model_a), model_device(model_b)
    with torch.no_grad(), eval_mode(model_a, model_b):
        template = capture(model_a, inputs[:1].to(device_a), [layer_a])[layer_a]  # A's activation shape, for noise
        for start in range(0, len(inputs), batch_size):
            batch = inputs[start : start + batch_size]
            acts_b = capture(model_b, batch.to(device_b), [layer_b])[layer_b]
            if null == "shuffled":
                sender = inputs[order[start : start + batch_size]].to(device_a)
                acts_a = capture(model_a, sender, [layer_a])[layer_a]
            else:
                acts_a = statistics.noise_like(template.expand(len(batch), *template.shape[1:]), generator)
            stitcher.partial_fit(acts_a, acts_b.to(acts_a.device))
    return stitcher


@contextlib.contextmanager
def null_sender(
    stitched: StitchedModel, null: str, *, seed: int = 0, statistics: SenderStatistics | None = None
) -> Iterator[None]:
    """While active, ``stitched`` receives null activations from model A: each batch's activations shuffled across
    the batch (``"shuffled"``; training batches of in-memory data are random subsets, so this pairs random samples)
    or replaced by noise with A's mean and covariance (``"noise"``, needs ``statistics``)."""
    generator = torch.Generator().manual_seed(check_seed(seed))
    original = stitched.activation_a

    def replaced(x: torch.Tensor) -> torch.Tensor:
        acts = original(x)
        if null == "shuffled":
            return acts[torch.randperm(len(acts), generator=generator).to(acts.device)]
        return statistics.noise_like(acts, generator)

    stitched.activation_a = replaced
    try:
        yield
    finally:
        del stitched.activation_a  # the class's method again


def stitch_nulls(
    model_a: nn.Module,
    model_b: nn.Module,
    layer_a: str,
    layer_b: str,
    method: Any,
    *,
    data: Any,
    eval_data: Any,
    direct_data: Any = None,
    nulls: tuple[str, ...] = NULLS,
    seed: int = 0,
    batch_size: int = 256,
) -> dict[str, dict[str, float]]:
    """``stitch_metrics`` of the stitch fitted by ``method`` from null senders, per null (``"shuffled"``, ``"noise"``).

    ``method``: a direct-matching estimator (cloned, fitted with ``fit_direct_null`` on ``direct_data``, default
    ``data``) or a ``TaskLoss`` (trained by ``fit_task_loss`` on ``data`` with a null sender, starting, unless its
    options say otherwise, from the least-squares fit of the same null, as the real one starts from the real
    least-squares fit). ``data`` and
    ``direct_data`` must be in memory (the nulls permute samples over the whole set). The null stitched networks are
    evaluated on ``eval_data`` with real activations, like the real one.
    """
    seed = check_seed(seed)
    direct_data = data if direct_data is None else direct_data
    inputs, _ = _memory(direct_data, "direct_data")
    if isinstance(method, TaskLoss):
        _memory(data, "data")  # in-memory training batches are random subsets: shuffling within one pairs at random
    statistics = SenderStatistics(model_a, layer_a, inputs, batch_size) if "noise" in nulls else None
    out: dict[str, dict[str, float]] = {}
    for index, null in enumerate(check_choice(n, "nulls", NULLS) for n in nulls):
        null_seed = seed + 1000 * index
        if isinstance(method, TaskLoss):
            options = dict(method.options)
            options.setdefault("progress", False)
            if "init" not in options:
                options["init"] = fit_direct_null(
                    LeastSquares(),
                    model_a,
                    model_b,
                    layer_a,
                    layer_b,
                    direct_data,
                    null,
                    seed=null_seed,
                    batch_size=batch_size,
                    statistics=statistics,
                )
            stitched = stitch(model_a, model_b, layer_a, layer_b)
            with null_sender(stitched, null, seed=null_seed, statistics=statistics):
                fit_task_loss(stitched, data, **options)
        else:
            fitted = fit_direct_null(
                clone(method),
                model_a,
                model_b,
                layer_a,
                layer_b,
                direct_data,
                null,
                seed=null_seed,
                batch_size=batch_size,
                statistics=statistics,
            )
            stitched = stitch(model_a, model_b, layer_a, layer_b, fitted)
        out[null] = stitch_metrics(stitched, eval_data)
    return out
