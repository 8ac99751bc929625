"""Convolutional building blocks of the relreps vision models (``lucmos/relreps``, ``modules/blocks.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from latentstitch._core.params import check_positive, check_positive_int

#: The relreps AE/VAE encoder channels.
DEFAULT_CHANNELS = (32, 64, 128, 256)


def scaled_channels(channels: Sequence[int], width: float) -> tuple[int, ...]:
    """``channels`` times a width multiplier, at least 1 each (a cheaper model of the same shape)."""
    check_positive(width, "width")
    return tuple(max(1, round(check_positive_int(c, "channels") * width)) for c in channels)


def _check_channels(channels: Sequence[int]) -> tuple[int, ...]:
    if isinstance(channels, (str, bytes)) or not isinstance(channels, Sequence) or not channels:
        raise TypeError(f"channels: expected a non-empty sequence of channel counts, got {channels!r}")
    return tuple(check_positive_int(c, "channels") for c in channels)


def conv_output_size(size: int) -> int:
    """Side of the output of a 3x3 convolution with stride 2 and padding 1."""
    return (size - 1) // 2 + 1


def check_image_shape(image_shape: Sequence[int]) -> tuple[int, int, int]:
    if len(image_shape) != 3:
        raise ValueError(f"image_shape: expected (channels, height, width), got {tuple(image_shape)}")
    return tuple(check_positive_int(s, "image_shape") for s in image_shape)  # type: ignore[return-value]


def conv_encoder(in_channels: int, channels: Sequence[int], *, last_activation: bool = True) -> nn.Sequential:
    """``[Conv2d(k3, s2, p1) -> BatchNorm2d -> GELU]`` per entry of ``channels``; each halves the image side
    (rounding up). ``last_activation=False`` drops the final GELU, as the relative AE/VAE do before projecting."""
    channels = _check_channels(channels)
    blocks = []
    previous = check_positive_int(in_channels, "in_channels")
    for i, out in enumerate(channels):
        last = i == len(channels) - 1
        activation = nn.GELU() if last_activation or not last else nn.Identity()
        blocks.append(
            nn.Sequential(nn.Conv2d(previous, out, kernel_size=3, stride=2, padding=1), nn.BatchNorm2d(out), activation)
        )
        previous = out
    return nn.Sequential(*blocks)


def conv_decoder(channels: Sequence[int], image_shape: Sequence[int]) -> nn.Sequential:
    """The mirror of ``conv_encoder(image_shape[0], channels)``: ``[ConvTranspose2d(s2, p1) -> BatchNorm2d ->
    GELU]`` per level back to the input side, then ``Conv2d(k3, p1) -> Sigmoid`` to ``image_shape[0]`` channels.

    As in relreps, each transposed convolution's kernel is chosen so the output side matches the encoder's
    input side at that level exactly (``kernel = target - 2 (input - 1) + 2``); outputs are in [0, 1].
    """
    in_channels, height, width = check_image_shape(image_shape)
    sides = [(height, width)]
    for _ in channels:
        sides.append((conv_output_size(sides[-1][0]), conv_output_size(sides[-1][1])))
    reversed_channels = [*reversed(channels), channels[0]]
    blocks = []
    for level in range(len(channels)):
        (h_in, w_in), (h_out, w_out) = sides[-1 - level], sides[-2 - level]
        kernel = (h_out - 2 * (h_in - 1) + 2, w_out - 2 * (w_in - 1) + 2)
        blocks.append(
            nn.Sequential(
                nn.ConvTranspose2d(
                    reversed_channels[level], reversed_channels[level + 1], kernel_size=kernel, stride=2, padding=1
                ),
                nn.BatchNorm2d(reversed_channels[level + 1]),
                nn.GELU(),
            )
        )
    blocks.append(nn.Sequential(nn.Conv2d(channels[0], in_channels, kernel_size=3, padding=1), nn.Sigmoid()))
    return nn.Sequential(*blocks)


def encoder_output_shape(image_shape: Sequence[int], channels: Sequence[int]) -> tuple[int, int, int]:
    """(C, H, W) of ``conv_encoder(image_shape[0], channels)``'s output."""
    _, height, width = check_image_shape(image_shape)
    for _ in channels:
        height, width = conv_output_size(height), conv_output_size(width)
    return channels[-1], height, width


def mlp_encoder(in_features: int, hidden: int, latent_dim: int) -> nn.Sequential:
    """``Flatten -> Linear -> ReLU -> Linear``: a small encoder whose last layer is linear (no activation on the
    latent)."""
    check_positive_int(in_features, "in_features")
    check_positive_int(hidden, "hidden")
    check_positive_int(latent_dim, "latent_dim")
    return nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, latent_dim))


def cnn_encoder(
    image_shape: Sequence[int] = (1, 28, 28), latent_dim: int = 64, *, channels: Sequence[int] = (32, 64)
) -> nn.Sequential:
    """``conv_encoder(channels) -> Flatten -> Linear(latent_dim)``: a small image encoder built from the relreps
    blocks (3x3 stride-2 convolutions, batch norm, GELU) with a linear latent."""
    channels = _check_channels(channels)
    c, h, w = encoder_output_shape(image_shape, channels)
    return nn.Sequential(
        conv_encoder(check_image_shape(image_shape)[0], channels),
        nn.Flatten(),
        nn.Linear(c * h * w, check_positive_int(latent_dim, "latent_dim")),
    )
