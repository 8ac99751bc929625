"""Multi-layer stitching: chains of networks joined at several layers, direct-matched and relative connectors."""

import copy

import pytest
import torch

from latentstitch.models import tiny10, tiny_resnet
from latentstitch.relative import relative_projection
from latentstitch.stitching import MultiStitchedModel, RelativeConnector, stitch_layers


@pytest.fixture
def nets(one_thread):
    torch.manual_seed(0)
    net = tiny10(0.5).eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.1)
                module.running_var.uniform_(0.5, 2.0)
    return net, torch.rand(48, 1, 28, 28)


def _permuted(net: torch.nn.Module, layer: int, seed: int = 0) -> torch.nn.Module:
    """The same function with the units of conv/bn ``layer`` permuted: a network symmetry."""
    other = copy.deepcopy(net)
    order = torch.randperm(
        other.get_submodule(f"conv{layer}").out_channels, generator=torch.Generator().manual_seed(seed)
    )
    with torch.no_grad():
        conv, bn, following = (
            other.get_submodule(f"{k}{i}") for k, i in (("conv", layer), ("bn", layer), ("conv", layer + 1))
        )
        conv.weight.copy_(conv.weight[order])
        conv.bias.copy_(conv.bias[order])
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(bn, name).copy_(getattr(bn, name)[order])
        following.weight.copy_(following.weight[:, order])
    return other


def test_a_network_chained_with_itself_by_least_squares_is_itself(nets):
    net, x = nets
    chain = stitch_layers([net, net, net], [("bn2", "bn2"), ("bn5", "bn5")], "least_squares", data=x)
    with torch.no_grad():
        torch.testing.assert_close(chain(x), net(x), atol=1e-4, rtol=1e-4)
    assert isinstance(chain.connectors[0], torch.nn.Conv2d)


def test_the_general_hook_path_runs_segments_inside_residual_blocks(one_thread):
    torch.manual_seed(0)
    net = tiny_resnet(0.5, blocks=(1, 1)).eval()
    x = torch.rand(16, 1, 12, 12)
    chain = stitch_layers([net, net, net], [("layer1.0.bn1", "layer1.0.bn1"), ("layer2.0.bn2", "layer2.0.bn2")], data=x)
    with torch.no_grad():
        torch.testing.assert_close(chain(x), net(x), atol=1e-4, rtol=1e-4)


def test_relative_connectors_do_not_see_a_permutation_of_units(nets):
    net, x = nets
    permuted = _permuted(net, 3)
    with torch.no_grad():
        torch.testing.assert_close(permuted(x), net(x))  # a symmetry of the network
    options = {"data": x, "num_anchors": 64, "seed": 1}
    same = stitch_layers([net, net], [("bn3", "bn3")], "relative", **options)
    across = stitch_layers([permuted, net], [("bn3", "bn3")], "relative", **options)
    with torch.no_grad():
        torch.testing.assert_close(across(x), same(x), atol=1e-5, rtol=1e-5)
        # a direct connector recovers the permutation itself
        direct = stitch_layers([permuted, net], [("bn3", "bn3")], "least_squares", data=x)
        torch.testing.assert_close(direct(x), net(x), atol=1e-4, rtol=1e-4)


def test_relative_connector_is_relative_projection_then_the_target_decoder():
    g = torch.Generator().manual_seed(0)
    source_anchors = torch.randn(20, 5, generator=g, dtype=torch.float64)
    target_anchors = torch.randn(20, 3, generator=g, dtype=torch.float64)
    target = torch.randn(200, 3, generator=g, dtype=torch.float64)
    connector = RelativeConnector.fit(source_anchors, target_anchors, target, center=False, ridge=1e-12)
    # the decoder is the least-squares fit of the target from its own relative vectors (rank 3 here: compare the
    # unique fitted values, not the coefficients)
    relative = relative_projection(target, target_anchors)
    design = torch.cat([relative, torch.ones(200, 1, dtype=torch.float64)], 1)
    fitted = design @ torch.linalg.lstsq(design, target, rcond=1e-10, driver="gelsd").solution
    torch.testing.assert_close(relative @ connector.weight + connector.bias, fitted, atol=1e-6, rtol=1e-6)
    a = torch.randn(7, 5, generator=g, dtype=torch.float64)
    expected = relative_projection(a, source_anchors) @ connector.weight + connector.bias
    torch.testing.assert_close(connector(a), expected)


def test_errors(nets):
    net, x = nets
    with pytest.raises(ValueError, match="models: 2 junctions join 3 networks, got 2 models"):
        MultiStitchedModel([net, net], [("bn2", "bn2"), ("bn5", "bn5")])
    with pytest.raises(ValueError, match=r"layers\[0\]\[1\]: Sequential has no layer named 'bn9'"):
        MultiStitchedModel([net, net], [("bn2", "bn9")])
    with pytest.raises(ValueError, match=r"connectors: expected one per junction \(1\), got 2"):
        stitch_layers([net, net], [("bn2", "bn2")], ["relative", "relative"], data=x)
    with pytest.raises(ValueError, match=r"connectors\[0\]: expected one of 'least_squares'"):
        stitch_layers([net, net], [("bn2", "bn2")], "ridge", data=x)
    with pytest.raises(ValueError, match="relative connectors pair positions, so the spatial sizes must agree"):
        stitch_layers([net, net], [("bn2", "bn3")], "relative", data=x)
    with pytest.raises(RuntimeError, match="junction 0 has no connector yet"):
        MultiStitchedModel([net, net], [("bn2", "bn2")])(x)
