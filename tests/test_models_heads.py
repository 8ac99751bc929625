"""Heads on frozen embeddings: the relreps recipe, batch-axis instance norm, relative zero-shot reuse."""

import pytest
import torch
from torch import nn

from latentstitch.invariance import ORTHOGONAL, random_transform
from latentstitch.models import AbsoluteHead, BatchInstanceNorm, RelativeHead, ZeroShotStitched, stitching_head
from latentstitch.training import RandomBatchSampler, TensorBatches, classification_loss, fit


def test_batch_instance_norm_is_the_official_transposed_instance_norm():
    x = torch.randn(32, 10) * 3 + 1
    official = nn.InstanceNorm1d(10)(x.permute(1, 0)).permute(1, 0)  # the notebooks' Lambda(permute) sandwich
    torch.testing.assert_close(BatchInstanceNorm()(x), official)
    out = BatchInstanceNorm()(x)
    torch.testing.assert_close(out.mean(0), torch.zeros(10), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="batch >= 2"):
        BatchInstanceNorm()(x[:1])


def test_head_recipes_match_the_notebooks():
    text = stitching_head(16, 5, "text")
    assert [type(m).__name__ for m in text] == [
        "LayerNorm",
        "Linear",
        "SiLU",
        "BatchInstanceNorm",
        "Linear",
        "SiLU",
        "BatchInstanceNorm",
        "Linear",
        "ReLU",
    ]
    vision = stitching_head(16, 5, "vision")
    assert [type(m).__name__ for m in vision] == ["LayerNorm", "Linear", "Tanh", "BatchInstanceNorm", "Linear"]
    assert text[-2].out_features == vision[-1].out_features == 5
    with pytest.raises(ValueError, match="recipe: expected one of 'text', 'vision'"):
        stitching_head(16, 5, "audio")


def test_relative_head_reads_l2_normalised_cosines():
    anchors = torch.randn(12, 6)
    head = RelativeHead(anchors, 3)
    x = torch.randn(9, 6)
    latents = head.encode(x)
    cosine = nn.functional.normalize(x, dim=1) @ nn.functional.normalize(anchors, dim=1).T
    torch.testing.assert_close(latents, nn.functional.normalize(cosine, dim=1))
    assert head(x).shape == (9, 3) and head.latent_width == 12


def embeddings(n=300, d=12, seed=0):
    generator = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 3
    centres = torch.randn(3, d, generator=torch.Generator().manual_seed(42)) * 2
    return centres[y] + torch.randn(n, d, generator=generator), y


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("recipe", ["text", "vision"])
def test_a_relative_head_reads_a_rotated_encoder_zero_shot_and_an_absolute_one_cannot(recipe):
    x, y = embeddings()
    anchors = x[:20]
    torch.manual_seed(0)
    relative = RelativeHead(anchors, 3, recipe=recipe)
    absolute = AbsoluteHead(12, 3, recipe=recipe)
    for head in (relative, absolute):
        fit(
            head,
            classification_loss,
            TensorBatches((x, y), RandomBatchSampler(len(x), 32, seed=0)),
            epochs=8,
            progress=False,
        )
    # Encoder B: the same embeddings in other (rotated) coordinates, with B's own view of the parallel anchors.
    rotate = random_transform(ORTHOGONAL, 12, seed=1)
    x_b, anchors_b = rotate(x), rotate(anchors)
    with torch.no_grad():
        own = (relative(x).argmax(1) == y).float().mean()
        stitched = (relative(x_b, anchors=anchors_b).argmax(1) == y).float().mean()
        absolute_stitched = (absolute(x_b).argmax(1) == y).float().mean()
    assert own > 0.95 and stitched == own
    assert (absolute(x).argmax(1) == y).float().mean() > 0.95 and absolute_stitched < 0.8
    encoder_b = RelativeHead(anchors_b, 3, recipe=recipe)  # "encoder B": only its anchors matter for encode
    with torch.no_grad():
        torch.testing.assert_close(ZeroShotStitched(encoder_b, relative)(x_b), relative(x))


def test_centred_relative_head_ignores_a_translation_of_the_space():
    torch.manual_seed(0)
    anchors, x = torch.randn(12, 6), torch.randn(20, 6)
    shift = torch.randn(6) * 5
    centred = RelativeHead(anchors, 3, center=True).eval()
    torch.testing.assert_close(centred.encode(x + shift, anchors + shift), centred.encode(x), atol=1e-5, rtol=0)
    expected = torch.nn.functional.normalize(
        torch.nn.functional.normalize(x - anchors.mean(0), dim=1)
        @ torch.nn.functional.normalize(anchors - anchors.mean(0), dim=1).T,
        dim=1,
    )
    torch.testing.assert_close(centred.encode(x), expected)
    plain = RelativeHead(anchors, 3).eval()
    assert not torch.allclose(plain.encode(x + shift, anchors + shift), plain.encode(x), atol=1e-3)
