"""Frankenstein networks: model A up to a named layer, a stitching layer, then model B after its named layer.

``StitchedModel`` runs A with a forward hook on ``layer_a`` that captures its output and stops A's forward pass,
applies the stitching layer, and runs B with a forward hook on ``layer_b`` that *replaces* that layer's output by
the stitched tensor. Everything after ``layer_b`` in B then reads the stitched activation exactly as it would have
read its own, whatever B's graph is: residual connections around the layer read it too, skip paths that bypass it
(the shortcut of a residual block when stitching *inside* the block) keep reading B's own tensors.

Cost: in general B's layers before ``layer_b`` are still computed (without gradient) and then discarded. When B is
a tree of plain ``nn.Sequential`` containers down to ``layer_b`` (as ``latentstitch.models.tiny10`` and
``tiny_resnet`` are), the stitched network skips them and runs only B's modules after ``layer_b``.
"""

from __future__ import annotations

import os
from itertools import chain
from typing import Any

import torch
from torch import nn

from latentstitch._core.params import check_positive_int, check_seed
from latentstitch.stitching._hooks import capture, format_shapes, layer_shapes, model_device, resolve_layer
from latentstitch.stitching._initialize import InitRequest, initial_layer
from latentstitch.stitching._io import load_stitching_layer, save_stitching_layer
from latentstitch.stitching._layers import in_features


def sequential_tail(model: nn.Module, name: str) -> list[nn.Module] | None:
    """The modules that run after ``name`` when ``model`` is a tree of plain ``nn.Sequential`` containers down to
    it (no subclass forward, no hooks on the containers); None otherwise (the hook path is then needed)."""
    containers: list[list[nn.Module]] = []
    module = model
    for part in name.split("."):
        if type(module).forward is not nn.Sequential.forward or module._forward_hooks or module._forward_pre_hooks:
            return None
        names = list(module._modules)
        if part not in names:
            return None
        position = names.index(part)
        containers.append([m for m in list(module._modules.values())[position + 1 :] if m is not None])
        module = module._modules[part]
    return [m for level in reversed(containers) for m in level]


class StitchedModel(nn.Module):
    """The Frankenstein network ``F(x) = T_B,layer_b(S(R_A,layer_a(x)))`` of Csiszárik et al. (2021), Def. 3.1.

    Runs ``model_a`` up to ``layer_a``, applies ``stitching_layer`` and continues ``model_b`` after ``layer_b``
    (see the module docstring for how, and for what it costs). Build it with ``stitch``.

    Both networks are frozen (``requires_grad=False`` on their parameters) and always run in eval mode (batch norm
    uses its running statistics): ``train()`` switches only the stitching layer. ``model_a`` and ``model_b`` may be
    the same object (a model stitched to itself).

    The stitching layer reads (N, C, H, W) feature maps per channel (a 1x1 convolution), (N, D) vectors (linear) or
    (N, T, D) sequences token by token (linear on the last dimension); ``LowRankStitch`` for a bottleneck.

    Attributes
    ----------
    model_a, model_b : nn.Module
    layer_a, layer_b : str
        Names from ``named_modules()``; a module called several times in a forward pass is stitched at its first
        call.
    stitching_layer : nn.Module or None
        None until initialised (``initialize`` / ``stitch`` / ``fit_task_loss``).
    direct_stitcher : estimator or None
        The direct-matching estimator the layer was initialised from, if any.
    keep_activations : bool
        When True, every forward also keeps ``last_stitched`` (the stitched activation) and ``last_activation_b``
        (B's own activation at ``layer_b``, which then needs B's full forward pass); used by CKA penalties.
    """

    def __init__(
        self,
        model_a: nn.Module,
        model_b: nn.Module,
        layer_a: str,
        layer_b: str,
        stitching_layer: nn.Module | None = None,
    ):
        super().__init__()
        resolve_layer(model_a, layer_a, "layer_a")
        resolve_layer(model_b, layer_b, "layer_b")
        self.model_a = model_a
        self.model_b = model_b
        self.layer_a = layer_a
        self.layer_b = layer_b
        self.stitching_layer = stitching_layer
        self.direct_stitcher = None
        self.keep_activations = False
        self.last_stitched: torch.Tensor | None = None
        self.last_activation_b: torch.Tensor | None = None
        for parameter in chain(model_a.parameters(), model_b.parameters()):
            parameter.requires_grad_(False)
        self.train(False)
        self._shapes_b: dict[tuple[int, ...], tuple[int, ...]] = {}

    # --- modes ---------------------------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> StitchedModel:
        """Set the stitching layer's mode; both networks stay in eval mode (frozen batch norm)."""
        self.training = mode
        if self.stitching_layer is not None:
            self.stitching_layer.train(mode)
        self.model_a.eval()
        self.model_b.eval()
        return self

    # --- forward -------------------------------------------------------------------------------------------------
    def activation_a(self, x: torch.Tensor) -> torch.Tensor:
        """Model A's activation at ``layer_a`` (A's forward pass stops there). No gradient unless ``x`` needs one."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and x.requires_grad):
            return capture(self.model_a, x, [self.layer_a])[self.layer_a]

    def stitch_activation(self, a: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The stitching layer applied to A's activation ``a``, with a clear error on a width or layout mismatch
        (``x``, the inputs, lets the error list the layers' shapes)."""
        layer = self.stitching_layer
        if layer is None:
            raise RuntimeError(
                "stitching_layer: not initialised yet; build with stitch(..., stitcher=...) or call "
                "initialize() or fit_task_loss() first"
            )
        expected = in_features(layer)
        features = a.shape[1] if a.ndim == 4 else a.shape[-1]
        wrong_layout = (isinstance(layer, nn.Conv2d) and a.ndim != 4) or (isinstance(layer, nn.Linear) and a.ndim == 4)
        if wrong_layout or (expected is not None and features != expected):
            kind = type(layer).__name__
            raise ValueError(
                f"stitching_layer: model_a's {self.layer_a!r} outputs {tuple(a.shape)}, which the {kind} expecting "
                f"{expected} features per position cannot read ((N, C, H, W) needs a 1x1 Conv2d, (N, D) and "
                f"(N, T, D) a Linear).{self.shape_listing(x)}"
            )
        return layer(a)

    def continue_b(self, x: torch.Tensor, stitched: torch.Tensor) -> torch.Tensor:
        """Model B's output with its ``layer_b`` activation replaced by ``stitched`` (``x``: the inputs)."""
        tail = None if self.keep_activations else sequential_tail(self.model_b, self.layer_b)
        if tail is not None:
            self._check_shape_b(x, stitched)
            out = stitched
            for module in tail:
                out = module(out)
            return out
        seen: list[torch.Tensor] = []

        def replace(_module: nn.Module, _inputs: Any, output: Any) -> Any:
            if seen:
                return None  # later calls of the same module are B's own
            seen.append(output)
            if not isinstance(output, torch.Tensor) or output.shape != stitched.shape:
                got = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
                raise ValueError(self._mismatch(tuple(stitched.shape), got, x))
            return stitched

        handle = self.model_b.get_submodule(self.layer_b).register_forward_hook(replace)
        try:
            out = self.model_b(x)
        finally:
            handle.remove()
        if not seen:
            raise RuntimeError(f"layer_b: {self.layer_b!r} was not called in model_b's forward pass")
        if self.keep_activations:
            self.last_activation_b = seen[0]
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stitched = self.stitch_activation(self.activation_a(x), x)
        if self.keep_activations:
            self.last_stitched = stitched
        return self.continue_b(x, stitched)

    # --- shape checks ------------------------------------------------------------------------------------------------
    def _check_shape_b(self, x: torch.Tensor, stitched: torch.Tensor) -> None:
        key = tuple(x.shape[1:])
        if key not in self._shapes_b:
            with torch.no_grad():
                own = capture(self.model_b, x[:1], [self.layer_b])[self.layer_b]
            self._shapes_b[key] = tuple(own.shape[1:])
        if tuple(stitched.shape[1:]) != self._shapes_b[key]:
            raise ValueError(self._mismatch(tuple(stitched.shape), (len(x), *self._shapes_b[key]), x))

    def _mismatch(self, got: tuple[int, ...], expected: Any, x: torch.Tensor | None) -> str:
        return (
            f"stitch {self.layer_a!r} -> {self.layer_b!r}: the stitching layer outputs {got} but model_b's "
            f"{self.layer_b!r} outputs {expected}; stitch layers of matching spatial size (or sequence length) "
            f"and set the stitching layer's output width to model_b's.{self.shape_listing(x)}"
        )

    def shape_listing(self, x: torch.Tensor | None) -> str:
        """Both models' layer shapes for one input of ``x`` (for error messages); empty without ``x``."""
        if x is None:
            return ""
        example = x[:1].detach()
        return (
            f"\nOutput shapes for one input {tuple(example.shape)}:\n  model_a: "
            f"{format_shapes(layer_shapes(self.model_a, example))}\n  model_b: "
            f"{format_shapes(layer_shapes(self.model_b, example))}"
        )

    # --- initialisation ----------------------------------------------------------------------------------------------
    def initialize(
        self,
        stitcher: Any,
        *,
        data: Any = None,
        example: Any = None,
        rank: int | None = None,
        seed: int = 0,
        batch_size: int = 256,
    ) -> StitchedModel:
        """Set the stitching layer (replacing any previous one); returns ``self``.

        Parameters
        ----------
        stitcher : str, estimator or nn.Module
            ``"least_squares"``: ``LeastSquares()`` (or ``ReducedRank(rank)``) fitted on ``data``, the paper's
            initialisation. A *fitted* estimator of ``latentstitch.stitching``: its map (``to_torch()``), the
            direct-matching initialisation. An unfitted one (with ``partial_fit``): first fitted on ``data``
            (streamed, ``fit_direct``). ``"random"``: PyTorch's default initialisation of the layer (seeded by
            ``seed``). ``"identity"``: the identity map (zero-padded or truncated when the widths differ). An
            ``nn.Module``: used as it is. (One small function per mode: ``latentstitch.stitching._initialize``.)
        data : optional
            Data to fit an estimator on (see ``latentstitch.stitching`` for its forms); its first batch also gives
            the widths for ``"random"`` / ``"identity"``.
        example : optional
            An input batch giving the widths when ``data`` is not given.
        rank : int, optional
            Make a ``LowRankStitch`` of this rank: from an estimator's map by its SVD (exact for ``ReducedRank``;
            ``"least_squares"`` fits ``ReducedRank(rank)``, the least-squares optimum of that rank), or with the
            reference code's orthogonal initialisation for ``"random"``.
        """
        if rank is not None:
            rank = check_positive_int(rank, "rank")
        request = InitRequest(
            self,
            data=data,
            example=example,
            rank=rank,
            seed=check_seed(seed),
            batch_size=check_positive_int(batch_size, "batch_size"),
        )
        layer, estimator = initial_layer(stitcher, request)
        if estimator is not None:
            self.direct_stitcher = estimator
        parameter = next(chain(self.model_a.parameters(), self.model_a.buffers()), None)
        dtype = parameter.dtype if parameter is not None and parameter.is_floating_point() else torch.float32
        self.stitching_layer = layer.to(device=model_device(self.model_a), dtype=dtype)
        self.stitching_layer.train(self.training)
        return self

    # --- saving ------------------------------------------------------------------------------------------------------
    def save_layer(self, path: str | os.PathLike) -> None:
        """Save the stitching layer (safetensors, with the layer names in the header)."""
        if self.stitching_layer is None:
            raise RuntimeError("stitching_layer: nothing to save, the model is not initialised")
        save_stitching_layer(self.stitching_layer, path, {"layer_a": self.layer_a, "layer_b": self.layer_b})

    def load_layer(self, path: str | os.PathLike) -> StitchedModel:
        """Load a stitching layer saved by ``save_layer`` (it must connect the same layer names); returns self."""
        layer, metadata = load_stitching_layer(path, with_metadata=True)
        saved = (metadata.get("layer_a"), metadata.get("layer_b"))
        if None not in saved and saved != (self.layer_a, self.layer_b):
            raise ValueError(
                f"path: the layer was saved for {saved[0]!r} -> {saved[1]!r}, not {self.layer_a!r} -> {self.layer_b!r}"
            )
        return self.initialize(layer)


def stitch(
    model_a: nn.Module,
    model_b: nn.Module,
    layer_a: str,
    layer_b: str,
    stitcher: Any = None,
    *,
    data: Any = None,
    example: Any = None,
    rank: int | None = None,
    seed: int = 0,
    batch_size: int = 256,
) -> StitchedModel:
    """Stitch ``model_a`` at ``layer_a`` into ``model_b`` at ``layer_b``: a ``StitchedModel`` (an ``nn.Module``).

    ``stitcher`` initialises the stitching layer (see ``StitchedModel.initialize``): a fitted direct-matching
    estimator (``LeastSquares``, ``Procrustes``, ``ReducedRank``, ``SparseLasso``...), an unfitted one fitted on
    ``data``, ``"least_squares"`` / ``"random"`` / ``"identity"``, or a ready ``nn.Module``; None leaves it empty
    for ``fit_task_loss`` to initialise (from least squares by default).

    Layer names are ``named_modules()`` names; an unknown one is an error listing the valid ones, and a stitching
    layer whose output does not fit ``layer_b`` is an error listing both models' layer shapes.

    Examples
    --------
    >>> ls = fit_direct(LeastSquares(), net_a, net_b, "bn3", "bn3", x_train)       # doctest: +SKIP
    >>> frank = stitch(net_a, net_b, "bn3", "bn3", ls)                              # doctest: +SKIP
    >>> fit_task_loss(frank, (x_train, y_train), epochs=30)                          # doctest: +SKIP
    """
    stitched = StitchedModel(model_a, model_b, layer_a, layer_b)
    if stitcher is not None:
        stitched.initialize(stitcher, data=data, example=example, rank=rank, seed=seed, batch_size=batch_size)
    elif rank is not None:
        raise ValueError("rank: give a stitcher to initialise the low-rank layer from")
    return stitched
