"""Small convolutional classifiers for model-stitching experiments: Tiny-10 and a tiny ResNet.

Both are plain ``nn.Sequential`` trees with named children, so every layer has a readable name for
``latentstitch.stitching.stitch`` and ``get_activations`` ("bn3", "layer2.0", "layer2.0.bn1"...), and the
stitched network can run the second model from the stitching point on without recomputing its first half.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from latentstitch._core.params import check_positive_int
from latentstitch.models._blocks import scaled_channels

#: Tiny-10's channels (Kornblith et al. 2019; ``renyi-ai/drfrankenstein`` ``models/classifiers/tiny10.py``)
TINY10_CHANNELS = (16, 16, 32, 32, 32, 64, 64, 64)
# (kernel, stride) of its eight convolutions, none padded
TINY10_KERNELS = ((3, 1), (3, 1), (3, 2), (3, 1), (3, 1), (3, 2), (3, 1), (1, 1))


class GlobalAveragePool(nn.Module):
    """(N, C, H, W) -> (N, C): the mean over spatial positions."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(-2, -1))


def tiny10(width: float = 1.0, *, in_channels: int = 1, num_classes: int = 10) -> nn.Sequential:
    """Tiny-10, the 10-layer convnet of Kornblith et al. (2019) used by Csiszárik et al. (2021).

    ``conv1, bn1, relu1, ..., conv8, bn8, relu8, pool, fc``: eight unpadded convolutions (3x3, strides 1, 1, 2, 1,
    1, 2, 1, and a final 1x1) with 16, 16, 32, 32, 32, 64, 64, 64 channels times ``width`` (at least 1 each), each
    followed by batch norm and ReLU, then a global average pool and a linear classifier. Module names are those of
    the reference code, so the paper's stitching points (after ``bn1`` ... ``bn8``) read the same.
    On 28 x 28 inputs the feature maps are 26, 24, 11, 9, 7, 3, 1, 1 pixels wide; inputs must be at least 27 x 27.
    """
    channels = scaled_channels(TINY10_CHANNELS, width)
    layers: OrderedDict[str, nn.Module] = OrderedDict()
    previous = check_positive_int(in_channels, "in_channels")
    for index, (out, (kernel, stride)) in enumerate(zip(channels, TINY10_KERNELS, strict=True), start=1):
        layers[f"conv{index}"] = nn.Conv2d(previous, out, kernel_size=kernel, stride=stride)
        layers[f"bn{index}"] = nn.BatchNorm2d(out)
        layers[f"relu{index}"] = nn.ReLU()
        previous = out
    layers["pool"] = GlobalAveragePool()
    layers["fc"] = nn.Linear(previous, check_positive_int(num_classes, "num_classes"))
    return nn.Sequential(layers)


class BasicBlock(nn.Module):
    """The ResNet basic block (He et al. 2016): ``relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))``.

    3x3 convolutions with padding 1; the shortcut is the identity, or a strided 1x1 convolution with batch norm
    (``downsample``) when the stride or the width changes. Stitching at the block's output keeps its residual path;
    stitching inside it (``bn1``...) replaces only the main branch's activation, the shortcut still reads the
    block's input.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu2 = nn.ReLU()
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu1(self.bn1(self.conv1(x)))
        return self.relu2(self.bn2(self.conv2(out)) + shortcut)


def tiny_resnet(
    width: float = 1.0,
    *,
    blocks: tuple[int, ...] = (1, 1),
    in_channels: int = 1,
    num_classes: int = 10,
) -> nn.Sequential:
    """A small ResNet: ``stem`` (3x3 conv, BN, ReLU; 16 x ``width`` channels), then stages ``layer1``,
    ``layer2``... of ``blocks[i]`` ``BasicBlock``s (16, 32, 64... x ``width`` channels, every stage after the first
    halving the resolution), global average ``pool`` and ``fc``. Block outputs are named ``layer1.0``, ``layer2.0``...
    as in torchvision's ResNets."""
    if not blocks:
        raise ValueError("blocks: expected at least one stage")
    stage_widths = scaled_channels([16 * 2**i for i in range(len(blocks))], width)
    stem_width = stage_widths[0]
    layers: OrderedDict[str, nn.Module] = OrderedDict()
    layers["stem"] = nn.Sequential(
        nn.Conv2d(check_positive_int(in_channels, "in_channels"), stem_width, 3, padding=1, bias=False),
        nn.BatchNorm2d(stem_width),
        nn.ReLU(),
    )
    previous = stem_width
    for stage, (count, out) in enumerate(zip(blocks, stage_widths, strict=True), start=1):
        stage_blocks = []
        for index in range(check_positive_int(count, "blocks")):
            stride = 2 if stage > 1 and index == 0 else 1
            stage_blocks.append(BasicBlock(previous, out, stride))
            previous = out
        layers[f"layer{stage}"] = nn.Sequential(*stage_blocks)
    layers["pool"] = GlobalAveragePool()
    layers["fc"] = nn.Linear(previous, check_positive_int(num_classes, "num_classes"))
    return nn.Sequential(layers)
