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

import json
import os
from itertools import chain
from typing import Any

import torch
from safetensors.torch import save_file
from sklearn.base import BaseEstimator
from torch import nn
from torch.nn import functional as F

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.params import (
    check_choice,
    check_nonnegative,
    check_number,
    check_output_path,
    check_positive_int,
    check_seed,
)
from latentstitch._core.persist import read_safetensors
from latentstitch.stitching._activations import (
    capture,
    fit_direct,
    format_shapes,
    iter_batches,
    layer_shapes,
    model_device,
    resolve_layer,
    to_model,
)
from latentstitch.stitching._base import _AffineMap
from latentstitch.stitching._lasso import SPARSITY_THRESHOLD
from latentstitch.stitching._least_squares import LeastSquares
from latentstitch.stitching._reduced_rank import ReducedRank

#: Initialisations by name: the least-squares fit on data, PyTorch's default layer init (orthogonal factors for a
#: low-rank layer, as the reference code), or the identity map.
INITS = ("least_squares", "random", "identity")
LAYER_FORMAT = "latentstitch.stitching_layer/1"
_HEADER_KEY = "latentstitch"


# --- stitching layers ----------------------------------------------------------------------------------------------


class LowRankStitch(nn.Module):
    """An affine stitching layer of rank at most ``rank``: ``x -> x W1 W2 + b`` (a bottleneck).

    ``w1`` (p, r), ``w2`` (r, q), ``bias`` (q,). Applied per feature with the convention of every stitching layer:
    on the channel dimension of (N, C, H, W) feature maps (a 1x1 convolution), on the last dimension of (N, D) and
    (N, T, D). Default initialisation as the reference code: orthogonal ``w1`` and ``w2``, zero bias.
    """

    def __init__(self, in_features: int, out_features: int, rank: int):
        super().__init__()
        p, q = check_positive_int(in_features, "in_features"), check_positive_int(out_features, "out_features")
        rank = check_positive_int(rank, "rank")
        if rank > min(p, q):
            raise ValueError(f"rank: expected at most min(in_features, out_features) = {min(p, q)}, got {rank}")
        self.w1 = nn.Parameter(torch.empty(p, rank))
        self.w2 = nn.Parameter(torch.empty(rank, q))
        self.bias = nn.Parameter(torch.zeros(q))
        self.reset_parameters()

    @property
    def rank(self) -> int:
        return self.w1.shape[1]

    def reset_parameters(self) -> None:
        nn.init.orthogonal_(self.w1)
        nn.init.orthogonal_(self.w2)
        nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = as_float_tensor(x, "x", finite=False)  # NaN propagates, as through any torch layer
        weight = (self.w1 @ self.w2).T
        if x.ndim == 4:
            return F.conv2d(x, weight[:, :, None, None], self.bias)
        return F.linear(x, weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.w1.shape[0]}, out_features={self.w2.shape[1]}, rank={self.rank}"


def affine_map(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """``(coef (p, q), intercept (q,))`` of a stitching layer, so that it computes ``x @ coef + intercept`` per
    feature: a 1x1 ``nn.Conv2d``, an ``nn.Linear`` or a ``LowRankStitch``. Differentiable (shares the parameters)."""
    if isinstance(layer, LowRankStitch):
        return layer.w1 @ layer.w2, layer.bias
    if isinstance(layer, nn.Conv2d):
        if layer.kernel_size != (1, 1) or layer.groups != 1 or layer.stride != (1, 1) or layer.padding != (0, 0):
            raise ValueError(f"layer: a stitching convolution must be a plain 1x1 convolution, got {layer}")
        coef = layer.weight[:, :, 0, 0].T
    elif isinstance(layer, nn.Linear):
        coef = layer.weight.T
    else:
        raise TypeError(f"layer: expected a 1x1 Conv2d, a Linear or a LowRankStitch, got {type(layer).__name__}")
    intercept = layer.bias if layer.bias is not None else torch.zeros_like(coef[0])
    return coef, intercept


def layer_from_map(coef: torch.Tensor, intercept: torch.Tensor, feature_maps: bool) -> nn.Module:
    """A trainable layer computing ``x @ coef + intercept`` per feature: a 1x1 ``nn.Conv2d`` for (N, C, H, W)
    feature maps, an ``nn.Linear`` otherwise (token-wise on (N, T, D)). Same device and dtype as ``coef``."""
    p, q = coef.shape
    factory = {"device": coef.device, "dtype": coef.dtype}
    layer = nn.Conv2d(p, q, kernel_size=1, **factory) if feature_maps else nn.Linear(p, q, **factory)
    with torch.no_grad():
        layer.weight.copy_(coef.T.reshape(layer.weight.shape))
        layer.bias.copy_(intercept)
    return layer


def low_rank_from_map(coef: torch.Tensor, intercept: torch.Tensor, rank: int) -> LowRankStitch:
    """A ``LowRankStitch`` from a map, factored by its SVD ``coef = U S V^T``: ``w1 = U_r S_r^(1/2)``,
    ``w2 = S_r^(1/2) V_r^T``. Exact for a map of rank <= ``rank`` (a ``ReducedRank`` fit); any other map is
    truncated to its best rank-``rank`` approximation in Frobenius norm (not the least-squares optimum of that
    rank: fit ``ReducedRank(rank)`` for that)."""
    p, q = coef.shape
    layer = LowRankStitch(p, q, rank).to(device=coef.device, dtype=coef.dtype)
    u, s, vh = torch.linalg.svd(coef.detach(), full_matrices=False)
    root = s[:rank].sqrt()
    with torch.no_grad():
        layer.w1.copy_(u[:, :rank] * root)
        layer.w2.copy_(root[:, None] * vh[:rank])
        layer.bias.copy_(intercept)
    return layer


def interpolate_layers(first: nn.Module, second: nn.Module, weight: float) -> nn.Module:
    """The stitching layer with map ``weight * M1 + (1 - weight) * M2`` (and bias likewise): the linear path between
    two stitching layers of the same shape (the paper's mode-connectivity experiment). The result is a full layer
    (1x1 ``Conv2d`` if either is one, else ``Linear``); low-rank layers enter through their full matrix."""
    weight = check_number(weight, "weight")
    coef_1, intercept_1 = affine_map(first)
    coef_2, intercept_2 = affine_map(second)
    if coef_1.shape != coef_2.shape:
        raise ValueError(f"first, second: maps of shapes {tuple(coef_1.shape)} and {tuple(coef_2.shape)} differ")
    feature_maps = isinstance(first, nn.Conv2d) or isinstance(second, nn.Conv2d)
    with torch.no_grad():
        return layer_from_map(
            weight * coef_1 + (1 - weight) * coef_2, weight * intercept_1 + (1 - weight) * intercept_2, feature_maps
        )


def sparsify_layer(layer: nn.Module, threshold: float = SPARSITY_THRESHOLD) -> tuple[nn.Module, float]:
    """A copy of a full stitching layer with every matrix entry of absolute value below ``threshold`` set to zero,
    and its sparsity (the share of zero entries): the paper's sparsity measurement (Fig. 8, threshold 1e-4)."""
    threshold = check_nonnegative(threshold, "threshold")
    coef, intercept = affine_map(layer)
    with torch.no_grad():
        kept = coef.abs() >= threshold
        out = layer_from_map(coef * kept, intercept, isinstance(layer, nn.Conv2d))
    return out, float(1 - kept.double().mean())


def _in_features(layer: nn.Module) -> int | None:
    if isinstance(layer, LowRankStitch):
        return layer.w1.shape[0]
    if isinstance(layer, nn.Conv2d):
        return layer.in_channels
    if isinstance(layer, nn.Linear):
        return layer.in_features
    return None


# --- saving -------------------------------------------------------------------------------------------------------


def save_stitching_layer(layer: nn.Module, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
    """Write a stitching layer (1x1 ``Conv2d``, ``Linear`` or ``LowRankStitch``) to one safetensors file.

    The parameters are the file's tensors; its kind, sizes and ``metadata`` (JSON-serialisable, e.g. the layer
    names it connects) are JSON in the header. Nothing is pickled; ``load_stitching_layer`` rebuilds it.
    """
    affine_map(layer)  # checks the type
    target = check_output_path(path, "path")
    if isinstance(layer, LowRankStitch):
        kind, sizes = "low_rank", {"in_features": layer.w1.shape[0], "out_features": layer.w2.shape[1]}
        sizes["rank"] = layer.rank
    elif isinstance(layer, nn.Conv2d):
        kind, sizes = "conv1x1", {"in_features": layer.in_channels, "out_features": layer.out_channels}
    else:
        kind, sizes = "linear", {"in_features": layer.in_features, "out_features": layer.out_features}
    tensors = {name: value.detach().cpu().contiguous() for name, value in layer.state_dict().items()}
    header = {"format": LAYER_FORMAT, "kind": kind, **sizes, "bias": "bias" in tensors, "metadata": metadata or {}}
    try:
        text = json.dumps(header)
    except TypeError as error:
        raise TypeError(f"metadata: not JSON-serialisable: {error}") from None
    save_file(tensors, os.fspath(target), metadata={_HEADER_KEY: text})


def load_stitching_layer(path: str | os.PathLike, *, with_metadata: bool = False) -> Any:
    """Read a layer written by ``save_stitching_layer`` (on the CPU); with ``with_metadata``, ``(layer, metadata)``.

    The whole file is checked before the layer is built: a readable safetensors file with a header of this format,
    a known kind with positive sizes, exactly the layer's tensors with the layer's shapes, finite values. Every
    error names the path and what is wrong."""
    metadata, tensors = read_safetensors(path, "path")
    where = repr(os.fspath(path))
    try:
        header = json.loads(metadata[_HEADER_KEY])
    except KeyError:
        raise ValueError(f"path: {where} was not written by save_stitching_layer (no latentstitch header)") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"path: {where} has a damaged header ({error})") from None
    if not isinstance(header, dict) or header.get("format") != LAYER_FORMAT:
        found = header.get("format") if isinstance(header, dict) else header
        raise ValueError(f"path: {where} has the format {found!r}, not a stitching layer ({LAYER_FORMAT!r})")
    try:
        layer = _empty_layer(header)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"path: {where} has a damaged header ({error})") from None
    expected = {name: tuple(value.shape) for name, value in layer.state_dict().items()}
    found = {name: tuple(value.shape) for name, value in tensors.items()}
    if expected != found:
        raise ValueError(f"path: {where} holds tensors {found}, but its header describes a layer with {expected}")
    for name, value in tensors.items():
        if not bool(torch.isfinite(value).all()):
            raise ValueError(f"path: {where} holds NaN or inf in {name!r}")
    layer.load_state_dict(tensors)
    return (layer, header.get("metadata", {})) if with_metadata else layer


def _empty_layer(header: dict[str, Any]) -> nn.Module:
    """The layer a stitching-layer header describes, before its tensors are loaded."""
    kind = check_choice(header["kind"], "kind", ("low_rank", "conv1x1", "linear"))
    p = check_positive_int(header["in_features"], "in_features")
    q = check_positive_int(header["out_features"], "out_features")
    if kind == "low_rank":
        return LowRankStitch(p, q, header["rank"])
    bias = header["bias"]
    if not isinstance(bias, bool):
        raise TypeError(f"bias: expected true or false, got {bias!r}")
    if kind == "conv1x1":
        return nn.Conv2d(p, q, kernel_size=1, bias=bias)
    return nn.Linear(p, q, bias=bias)


# --- the stitched network -------------------------------------------------------------------------------------------


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
        expected = _in_features(layer)
        features = a.shape[1] if a.ndim == 4 else a.shape[-1]
        wrong_layout = (isinstance(layer, nn.Conv2d) and a.ndim != 4) or (isinstance(layer, nn.Linear) and a.ndim == 4)
        if wrong_layout or (expected is not None and features != expected):
            kind = type(layer).__name__
            raise ValueError(
                f"stitching_layer: model_a's {self.layer_a!r} outputs {tuple(a.shape)}, which the {kind} expecting "
                f"{expected} features per position cannot read ((N, C, H, W) needs a 1x1 Conv2d, (N, D) and "
                f"(N, T, D) a Linear).{self._shape_listing(x)}"
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
            f"and set the stitching layer's output width to model_b's.{self._shape_listing(x)}"
        )

    def _shape_listing(self, x: torch.Tensor | None) -> str:
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
            ``nn.Module``: used as it is.
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
        seed = check_seed(seed)
        batch_size = check_positive_int(batch_size, "batch_size")
        if isinstance(stitcher, str):
            check_choice(stitcher, "stitcher", INITS)
            if stitcher == "least_squares":
                stitcher = LeastSquares() if rank is None else ReducedRank(rank)
        if isinstance(stitcher, nn.Module):
            if rank is not None:
                raise ValueError("rank: give either a ready stitching layer or a rank, not both")
            layer = stitcher
        elif isinstance(stitcher, str):
            layer = self._new_layer(stitcher, data, example, rank, seed, batch_size)
        elif isinstance(stitcher, BaseEstimator):
            if not hasattr(stitcher, "coef_"):
                if data is None:
                    raise ValueError(f"data: needed to fit the unfitted {type(stitcher).__name__}")
                fit_direct(
                    stitcher, self.model_a, self.model_b, self.layer_a, self.layer_b, data, batch_size=batch_size
                )
            layer = self._layer_from_estimator(stitcher, rank)
            self.direct_stitcher = stitcher
        else:
            raise TypeError(
                f"stitcher: expected one of {INITS}, an estimator of latentstitch.stitching or an nn.Module, got "
                f"{type(stitcher).__name__}"
            )
        parameter = next(chain(self.model_a.parameters(), self.model_a.buffers()), None)
        dtype = parameter.dtype if parameter is not None and parameter.is_floating_point() else torch.float32
        self.stitching_layer = layer.to(device=model_device(self.model_a), dtype=dtype)
        self.stitching_layer.train(self.training)
        return self

    def _layer_from_estimator(self, estimator: Any, rank: int | None) -> nn.Module:
        if not isinstance(estimator, _AffineMap):
            raise TypeError(f"stitcher: expected an estimator of latentstitch.stitching, got {type(estimator)}")
        layer = estimator.to_torch(dtype=torch.float64)
        coef, intercept = affine_map(layer)
        if rank is not None:
            return low_rank_from_map(coef, intercept, rank).float()
        return layer.float()

    def _new_layer(self, kind: str, data: Any, example: Any, rank: int | None, seed: int, batch_size: int):
        if example is None:
            if data is None:
                raise ValueError(f"example: an input batch (or data) is needed to size a {kind!r} stitching layer")
            example = next(iter_batches(data, batch_size))[0]
        example = torch.as_tensor(example)[:2]
        with torch.no_grad():
            a = capture(self.model_a, to_model(self.model_a, example), [self.layer_a])[self.layer_a]
            b = capture(self.model_b, to_model(self.model_b, example), [self.layer_b])[self.layer_b]
        if a.ndim != b.ndim:
            raise ValueError(
                f"layer_a, layer_b: model_a's {self.layer_a!r} outputs {tuple(a.shape)} but model_b's "
                f"{self.layer_b!r} outputs {tuple(b.shape)}: different layouts cannot be stitched per feature."
                + self._shape_listing(example)
            )
        p = a.shape[1] if a.ndim == 4 else a.shape[-1]
        q = b.shape[1] if b.ndim == 4 else b.shape[-1]
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            if kind == "identity":
                if rank is not None:
                    raise ValueError("rank: the identity has no unique low-rank version; use another init")
                layer = layer_from_map(torch.eye(p, q), torch.zeros(q), a.ndim == 4)
            elif rank is not None:
                layer = LowRankStitch(p, q, rank)
            else:
                layer = nn.Conv2d(p, q, kernel_size=1) if a.ndim == 4 else nn.Linear(p, q)
        finally:
            torch.random.set_rng_state(generator_state)
        return layer

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
