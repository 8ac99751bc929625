"""Multi-layer stitching: a chain of networks joined at several layers at once.

The relative-representations paper lists "stitching multiple layers" as a direction towards modular, reusable
components; Dr. Frankenstein networks stitch at one layer. A ``MultiStitchedModel`` runs a chain of networks
``models[0] -> models[1] -> ... -> models[k]``: ``models[0]`` up to the layer ``layers[0][0]``, a connector, then
``models[1]`` from just after ``layers[0][1]`` up to ``layers[1][0]``, a connector, and so on; the last network
runs to its output. With two networks, ``[net_a, net_b, net_a]`` and layer pairs ``("bn3", "bn3"), ("bn6",
"bn6")`` swaps the middle block of A for B's (a "sandwich"); any number of junctions and networks works.

Each junction has its own connector:

- **direct-matched** (``"least_squares"``, ``"procrustes"``, any estimator of ``latentstitch.stitching`` or a ready
  ``nn.Module``): an affine map fitted on *paired* activations of ``data`` (1x1 convolution for feature maps), as
  ``stitch`` does for one layer;
- **relative** (``"relative"``, a ``RelativeConnector``): zero-shot in the sense of relative representations. The
  source activation is described by its similarities to the source network's activations of the anchor inputs, and
  a linear decoder fitted on the *target network alone* (its own activations of ``data``, relative to its own
  anchor activations) turns that description into the target's activation. The two networks share nothing but
  the anchor inputs, so connectors can be prepared per network and combined later.

Connectors are fitted one junction after another on the activations the chain itself produces, so a later
connector sees (and compensates) the errors of the earlier ones. Feature maps are matched per position ((N*H*W, C)
rows, the paper's convention), so the two layers of a junction need the same spatial size.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from torch import nn

from latentstitch._core.params import check_positive_int, check_seed
from latentstitch.stitching._connectors import (
    CONNECTORS,
    RelativeConnector,
    as_per_position,
    direct_connector,
    rows_of,
)
from latentstitch.stitching._data import iter_batches
from latentstitch.stitching._hooks import StopForward, capture, model_device, resolve_layer
from latentstitch.stitching._model import sequential_tail

# --- running a segment of a network ----------------------------------------------------------------------------------


def _segment(model: nn.Module, entry: str, exit_: str | None) -> list[nn.Module] | None:
    """The modules run after ``entry`` up to and including ``exit_`` (to the output if None), when ``model`` is a
    tree of plain ``nn.Sequential`` containers and ``exit_`` is one of those modules; None otherwise."""
    tail = sequential_tail(model, entry)
    if tail is None or exit_ is None:
        return tail
    target = model.get_submodule(exit_)
    for position, module in enumerate(tail):
        if module is target:
            return tail[: position + 1]
    return None


def run_segment(
    model: nn.Module, x: torch.Tensor, entry: str, activation: torch.Tensor, exit_: str | None
) -> torch.Tensor:
    """``model``'s computation with the output of ``entry`` replaced by ``activation``, up to the output of
    ``exit_`` (the network's output if None). ``x`` is the network's input (needed by the general path, which
    runs the whole network with hooks; plain ``nn.Sequential`` trees run only the segment)."""
    modules = _segment(model, entry, exit_)
    if modules is not None:
        out = activation
        for module in modules:
            out = module(out)
        return out
    state: dict[str, Any] = {}

    def replace(_module: nn.Module, _inputs: Any, output: Any) -> Any:
        if "replaced" in state:
            return None
        if not isinstance(output, torch.Tensor) or output.shape != activation.shape:
            got = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
            raise ValueError(f"layers: the connector outputs {tuple(activation.shape)} but {entry!r} outputs {got}")
        state["replaced"] = True
        return activation

    def grab(_module: nn.Module, _inputs: Any, output: Any) -> None:
        if "out" in state:
            return
        if "replaced" not in state:
            raise ValueError(f"layers: {exit_!r} runs before {entry!r} in {type(model).__name__}; exits follow entries")
        state["out"] = output
        raise StopForward

    handles = [model.get_submodule(entry).register_forward_hook(replace)]
    if exit_ is not None:
        handles.append(model.get_submodule(exit_).register_forward_hook(grab))
    try:
        out = model(x)
    except StopForward:
        out = state["out"]
    finally:
        for handle in handles:
            handle.remove()
    if "replaced" not in state:
        raise RuntimeError(f"layers: {entry!r} was not called in {type(model).__name__}'s forward pass")
    return out


def _first_segment(model: nn.Module, x: torch.Tensor, exit_: str) -> torch.Tensor:
    return capture(model, x, [exit_])[exit_]


# --- the chained network -----------------------------------------------------------------------------------------


class MultiStitchedModel(nn.Module):
    """A chain of networks stitched at several layers (see the module docstring). Build it with ``stitch_layers``.

    Attributes
    ----------
    models : list of nn.Module
        ``len(layers) + 1`` networks (the same object may appear several times), frozen and in eval mode.
    layers : list of (exit, entry) name pairs
        Junction i leaves ``models[i]`` after ``exit`` and enters ``models[i + 1]`` after ``entry``.
    connectors : nn.ModuleList
        One per junction (None until fitted).
    """

    def __init__(self, models: Sequence[nn.Module], layers: Sequence[tuple[str, str]]):
        super().__init__()
        models = list(models)
        layers = [tuple(pair) for pair in layers]
        if not layers:
            raise ValueError("layers: expected at least one (exit, entry) pair of layer names")
        if any(len(pair) != 2 for pair in layers):
            raise ValueError(f"layers: expected (exit, entry) pairs of layer names, got {layers}")
        if len(models) != len(layers) + 1:
            raise ValueError(
                f"models: {len(layers)} junctions join {len(layers) + 1} networks, got {len(models)} models"
            )
        for index, (exit_, entry) in enumerate(layers):
            resolve_layer(models[index], exit_, f"layers[{index}][0]")
            resolve_layer(models[index + 1], entry, f"layers[{index}][1]")
        self._models = models  # not registered as submodules: the same network may appear several times
        self.layers = layers
        self.connectors = nn.ModuleList([nn.Identity() for _ in layers])
        self.fitted = [False] * len(layers)
        for parameter in chain.from_iterable(m.parameters() for m in models):
            parameter.requires_grad_(False)
        self.train(False)

    @property
    def models(self) -> list[nn.Module]:
        return self._models

    def train(self, mode: bool = True) -> MultiStitchedModel:
        """Set the connectors' mode; the networks stay in eval mode (frozen batch norm)."""
        self.training = mode
        self.connectors.train(mode)
        for model in self._models:
            model.eval()
        return self

    def to(self, *args: Any, **kwargs: Any) -> MultiStitchedModel:
        for model in dict.fromkeys(self._models):
            model.to(*args, **kwargs)
        return super().to(*args, **kwargs)

    def activation(self, x: torch.Tensor, junction: int) -> torch.Tensor:
        """The activation the chain delivers to junction ``junction`` (before its connector)."""
        h = _first_segment(self._models[0], x, self.layers[0][0])
        for index in range(junction):
            self._check_fitted(index)
            h = run_segment(
                self._models[index + 1], x, self.layers[index][1], self.connectors[index](h), self.layers[index + 1][0]
            )
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layers) - 1
        h = self.activation(x, last)
        self._check_fitted(last)
        return run_segment(self._models[-1], x, self.layers[last][1], self.connectors[last](h), None)

    def _check_fitted(self, index: int) -> None:
        if not self.fitted[index]:
            raise RuntimeError(f"connectors: junction {index} has no connector yet; build the model with stitch_layers")

    def set_connector(self, index: int, connector: nn.Module) -> None:
        parameter = next(chain(self._models[index + 1].parameters(), self._models[index + 1].buffers()), None)
        dtype = parameter.dtype if parameter is not None and parameter.is_floating_point() else torch.float32
        self.connectors[index] = connector.to(device=model_device(self._models[index + 1]), dtype=dtype)
        self.fitted[index] = True

    def extra_repr(self) -> str:
        route = " -> ".join(f"{exit_}|{entry}" for exit_, entry in self.layers)
        return f"networks={len(self._models)}, junctions: {route}"


def _gather(function: Any, data: Any, batch_size: int) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([function(inputs).detach().float().cpu() for inputs, _ in iter_batches(data, batch_size)])


def stitch_layers(
    models: Sequence[nn.Module],
    layers: Sequence[tuple[str, str]],
    connectors: Any = "least_squares",
    *,
    data: Any,
    anchors: Any = None,
    num_anchors: int = 256,
    similarity: str = "cosine",
    center: bool = True,
    ridge: float = 1e-3,
    max_rows: int = 50_000,
    seed: int = 0,
    batch_size: int = 256,
) -> MultiStitchedModel:
    """Stitch a chain of networks at several layers at once (see ``latentstitch.stitching._multilayer``).

    Parameters
    ----------
    models : sequence of nn.Module
        ``len(layers) + 1`` networks, e.g. ``[net_a, net_b, net_a]``.
    layers : sequence of (exit, entry)
        Layer names (``named_modules()``) of each junction: leave ``models[i]`` after ``exit``, enter
        ``models[i + 1]`` after ``entry``.
    connectors : str, estimator, nn.Module, or a sequence of them (one per junction)
        ``"least_squares"``, ``"procrustes"`` or an estimator of ``latentstitch.stitching`` (unfitted: fitted on
        paired activations of ``data``; fitted: used as it is), ``"relative"`` (a ``RelativeConnector``), or a
        ready ``nn.Module``.
    data : inputs, (inputs, labels) or batches
        Inputs the connectors are fitted on (labels are ignored).
    anchors : inputs, optional
        The anchor inputs of relative connectors (default: 64 inputs of ``data`` drawn with ``seed``).
    num_anchors : int
        Relative connectors: anchor rows (positions of the anchor inputs' feature maps, drawn with ``seed``; the
        same positions on both sides).
    similarity, center : str, bool
        The relative projection of relative connectors (default centred cosine).
    ridge : float
        Relative connectors' decoder ridge, relative to the mean eigenvalue of the relative vectors' Gram matrix.
    max_rows : int
        At most this many (position) rows, drawn with ``seed``, to fit each connector on.
    seed, batch_size : int

    Returns
    -------
    MultiStitchedModel, every connector fitted, in eval mode.
    """
    model = MultiStitchedModel(models, layers)
    specs = list(connectors) if isinstance(connectors, (list, tuple)) else [connectors] * len(model.layers)
    if len(specs) != len(model.layers):
        raise ValueError(f"connectors: expected one per junction ({len(model.layers)}), got {len(specs)}")
    for index, spec in enumerate(specs):
        if isinstance(spec, str) and spec not in CONNECTORS:
            raise ValueError(f"connectors[{index}]: expected one of {', '.join(map(repr, CONNECTORS))}, got {spec!r}")
        if not isinstance(spec, (str, nn.Module, BaseEstimator)):
            raise TypeError(f"connectors[{index}]: expected a name, an estimator or an nn.Module, got {type(spec)}")
    num_anchors = check_positive_int(num_anchors, "num_anchors")
    max_rows = check_positive_int(max_rows, "max_rows")
    generator = np.random.default_rng(check_seed(seed))
    anchor_inputs = None
    if any(spec == "relative" for spec in specs):
        if anchors is None:
            inputs = torch.cat([batch for batch, _ in iter_batches(data, batch_size)])
            anchors = inputs[torch.from_numpy(generator.choice(len(inputs), min(64, len(inputs)), replace=False))]
        anchor_inputs = torch.as_tensor(anchors)
    with torch.no_grad():
        for index, spec in enumerate(specs):
            target_model, (exit_, entry) = model.models[index + 1], model.layers[index]
            device = model_device(target_model)
            if isinstance(spec, nn.Module):
                model.set_connector(index, spec)
                continue

            def source_fn(inputs: torch.Tensor, index: int = index) -> torch.Tensor:
                return model.activation(inputs.to(model_device(model.models[0])), index)

            def target_fn(inputs: torch.Tensor, entry: str = entry, target_model: nn.Module = target_model):
                return _first_segment(target_model, inputs.to(model_device(target_model)), entry)

            target = _gather(target_fn, data, batch_size)
            if spec == "relative":
                source_anchor_maps = _gather(source_fn, anchor_inputs, batch_size)
                target_anchor_maps = _gather(target_fn, anchor_inputs, batch_size)
                source_rows, target_rows = rows_of(source_anchor_maps), rows_of(target_anchor_maps)
                if source_rows.shape[0] != target_rows.shape[0]:
                    raise ValueError(
                        f"layers[{index}]: {exit_!r} gives {tuple(source_anchor_maps.shape[1:])} per input but "
                        f"{entry!r} gives {tuple(target_anchor_maps.shape[1:])}: relative connectors pair positions, "
                        "so the spatial sizes must agree"
                    )
                pick = generator.choice(len(source_rows), min(num_anchors, len(source_rows)), replace=False)
                rows = rows_of(target)
                fit_rows = rows[generator.choice(len(rows), min(max_rows, len(rows)), replace=False)]
                connector = RelativeConnector.fit(
                    source_rows[pick].to(device),
                    target_rows[pick].to(device),
                    fit_rows.to(device),
                    similarity=similarity,
                    center=center,
                    ridge=ridge,
                )
            else:
                source = _gather(source_fn, data, batch_size)
                if source.shape[0] != target.shape[0] or source.shape[2:] != target.shape[2:]:
                    raise ValueError(
                        f"layers[{index}]: {exit_!r} outputs {tuple(source.shape[1:])} per input and {entry!r} "
                        f"{tuple(target.shape[1:])}: a direct connector needs the same positions"
                    )
                rows_s, rows_t = rows_of(source), rows_of(target)
                if len(rows_s) > max_rows:  # fit on a subsample of the (position) rows
                    pick = torch.from_numpy(generator.choice(len(rows_s), max_rows, replace=False))
                    rows_s, rows_t = rows_s[pick], rows_t[pick]
                connector = as_per_position(direct_connector(spec, rows_s, rows_t), source.ndim)
            model.set_connector(index, connector)
    return model.eval()
