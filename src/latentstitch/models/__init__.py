"""Models with absolute or relative latent spaces: image classifiers, autoencoders and VAEs, heads on frozen
embeddings, graph convolutional networks, and the zero-shot stitching of two of them; small convnets with named
layers for model stitching (Tiny-10, a tiny ResNet)."""

from latentstitch.models._autoencoder import (
    RECONSTRUCTION_LOSSES,
    AutoencoderOutput,
    ConvAutoencoder,
    reconstruction_objective,
)
from latentstitch.models._blocks import cnn_encoder, conv_decoder, conv_encoder, mlp_encoder, scaled_channels
from latentstitch.models._classifier import PROJECTIONS, AnchorEmbeddings, LatentClassifier
from latentstitch.models._convnets import TINY10_CHANNELS, BasicBlock, GlobalAveragePool, tiny10, tiny_resnet
from latentstitch.models._gcn import GCNClassifier, GCNLayer, node_classification_loss, normalized_adjacency
from latentstitch.models._heads import HEAD_RECIPES, AbsoluteHead, BatchInstanceNorm, RelativeHead, stitching_head
from latentstitch.models._training import accuracy, train_classifier
from latentstitch.models._zero_shot import ZeroShotStitched

__all__ = [
    "HEAD_RECIPES",
    "PROJECTIONS",
    "RECONSTRUCTION_LOSSES",
    "TINY10_CHANNELS",
    "AbsoluteHead",
    "AnchorEmbeddings",
    "AutoencoderOutput",
    "BasicBlock",
    "BatchInstanceNorm",
    "ConvAutoencoder",
    "GCNClassifier",
    "GCNLayer",
    "GlobalAveragePool",
    "LatentClassifier",
    "RelativeHead",
    "ZeroShotStitched",
    "accuracy",
    "cnn_encoder",
    "conv_decoder",
    "conv_encoder",
    "mlp_encoder",
    "node_classification_loss",
    "normalized_adjacency",
    "reconstruction_objective",
    "scaled_channels",
    "stitching_head",
    "tiny10",
    "tiny_resnet",
    "train_classifier",
]
