"""The contract suite covers every public estimator, measure, torch module and CLI command: a new one must join its
registry (tests/contract/contract_registry.py), with the invalid values of its own hyperparameters."""

from __future__ import annotations

import inspect

import pytest
from contract_registry import CLI, ESTIMATORS, MEASURES, MODULES, NOT_COVERED_MEASURES, STREAMING
from torch import nn

from latentstitch import losses, models, relative, similarity, stitching
from latentstitch._core.persist import registered_classes
from latentstitch.cli import COMMANDS


def test_every_registered_measure_is_covered():
    missing = sorted(set(similarity.MEASURES) - set(MEASURES) - set(NOT_COVERED_MEASURES))
    assert not missing, f"add these measures to contract_registry.MEASURES (with their bad option values): {missing}"
    assert not set(MEASURES) - set(similarity.MEASURES), "the registry names measures that do not exist"


def test_every_streaming_accumulator_is_covered():
    public = {name for name in similarity.__all__ if name.startswith("Streaming")}
    covered = {name.split("(")[0] for name in STREAMING}
    assert public == covered, f"add to contract_registry.STREAMING: {sorted(public - covered)}"


def test_every_persistable_estimator_is_covered():
    # importing latentstitch's subpackages above registered every Persistable subclass
    public = {name for name in registered_classes() if not name.startswith("_")}
    missing = sorted(public - set(ESTIMATORS))
    assert not missing, f"add these estimators to contract_registry.ESTIMATORS (with their bad parameters): {missing}"


@pytest.mark.parametrize("package", [relative, models, stitching, losses], ids=lambda p: p.__name__)
def test_every_public_torch_module_is_covered(package):
    modules = {
        name
        for name in package.__all__
        if inspect.isclass(getattr(package, name))
        and issubclass(getattr(package, name), nn.Module)
        and getattr(package, name).__module__.startswith("latentstitch")
    }
    # Containers whose behaviour is their parts' (covered through them): the stitched pair of two models, the
    # building blocks of the convnets, and the stitched network of stitching (covered by the stitching cases).
    # MultiStitchedModel is the chain of the user's own networks joined at several layers by connectors: it holds
    # no arithmetic of its own (its connectors, RelativeConnector and the stitchers, are covered), and its own
    # arguments (models, layer names, connectors) are refused in tests/stitching/test_multilayer.py.
    composites = {
        "ZeroShotStitched",
        "StitchedModel",
        "MultiStitchedModel",
        "BasicBlock",
        "GlobalAveragePool",
        "GCNLayer",
        "AnchorEmbeddings",
    }
    missing = sorted(modules - set(MODULES) - composites)
    assert not missing, f"add these modules to contract_registry.MODULES: {missing}"


def test_every_cli_command_is_covered():
    assert set(COMMANDS) <= set(CLI), f"add these commands to contract_registry.CLI: {sorted(set(COMMANDS) - set(CLI))}"
