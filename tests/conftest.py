import os

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

# Invariance properties are cheap but numerous; keep hypothesis quick and deterministic in CI.
settings.register_profile(
    "ci", max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

# At most two intra-op threads, unless OMP_NUM_THREADS says otherwise (.ci/run's second pass on other kernels runs
# one thread: another order of each parallel sum).
if "OMP_NUM_THREADS" not in os.environ:
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def pytest_addoption(parser):
    parser.addoption(
        "--device",
        default="cpu",
        help="torch device for the device-generic tests (those taking the `device` fixture): cpu (default), cuda, "
        "cuda:1, ...",
    )


def pytest_configure(config):
    name = config.getoption("--device")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise pytest.UsageError(f"--device: {name!r} is not a torch device (cpu, cuda, cuda:1, ...)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {name}: this machine's torch sees no CUDA device")


@pytest.fixture(scope="session")
def device(request) -> torch.device:
    """The device of ``pytest --device`` (default cpu): tests that take this fixture put their tensors there, so
    the math suite runs on a GPU with ``pytest --device cuda``. Session-scoped (a device is immutable), so that
    hypothesis tests can take it."""
    return torch.device(request.config.getoption("--device"))


@pytest.fixture(scope="session")
def on(device):
    """``on(*arrays)``: numpy arrays (or tensors) as tensors on the ``--device``; one array gives one tensor."""

    def move(*arrays):
        moved = tuple(torch.as_tensor(a).to(device) for a in arrays)
        return moved[0] if len(moved) == 1 else moved

    return move


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def one_thread():
    """Train tiny models on one thread: on a busy 2-core machine, a second intra-op thread spin-waits and makes
    small convolutions and matrix products several times slower (measured 2.4 s -> 9.9 s for a small AE)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
