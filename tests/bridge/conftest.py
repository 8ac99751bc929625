import pytest
import torch
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def single_thread():
    """A bridge fit is many small solves: on a shared 2-core machine a second thread (torch's or the BLAS's)
    spin-waits and makes them several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(threads)
