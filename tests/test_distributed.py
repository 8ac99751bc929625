"""Dask arrays and a real LocalCluster give the in-memory results; a killed worker's tasks are recomputed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

da = pytest.importorskip("dask.array", reason="needs the dask extra: pip install 'latentstitch[dask]'")
distributed = pytest.importorskip("distributed", reason="needs the dask extra: pip install 'latentstitch[dask]'")
import cloudpickle  # noqa: E402  (dask's transport; installed with distributed)
import dask  # noqa: E402

from latentstitch import relative_projection  # noqa: E402
from latentstitch import similarity as sim  # noqa: E402
from latentstitch._core.errors import ZeroNormError  # noqa: E402
from latentstitch.distributed import get_client, is_dask_array, map_tasks  # noqa: E402
from latentstitch.stitching import LeastSquares, Procrustes, ReducedRank, SparseLasso  # noqa: E402

# Functions defined here run on the workers, which cannot import this test module: ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def drifting_pair(n=3000, p=24, q=16, seed=0, dtype=np.float64):
    """Paired rows whose mean drifts far from the first block's, so the accumulators' shifts are exercised."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p)) * np.linspace(0.5, 3, p) + np.linspace(0, 40, n)[:, None]
    y = np.tanh(x @ rng.standard_normal((p, q)) / 30) * 5 + 0.3 * rng.standard_normal((n, q)) + 100.0
    return x.astype(dtype), y.astype(dtype)


def relative_error(value, reference):
    value, reference = np.asarray(value), np.asarray(reference)
    return float(np.linalg.norm(value - reference) / np.linalg.norm(reference))


@pytest.fixture
def threads_scheduler():
    """Dask's in-process threaded scheduler, whatever client another test may have made the default."""
    with dask.config.set(scheduler="threads"):
        yield


# --- without a cluster ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_importing_latentstitch_does_not_import_dask():
    code = (
        "import sys, latentstitch, latentstitch.stitching, latentstitch.similarity, latentstitch.distributed\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_is_dask_array():
    x = np.zeros((4, 2))
    assert is_dask_array(da.from_array(x))
    assert not is_dask_array(x)
    assert not is_dask_array(torch.from_numpy(x))


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # what an environment without the extra sees
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'latentstitch\[dask\]'"):
        get_client()


def test_get_client_rejects_other_types():
    with pytest.raises(TypeError, match="client: expected a distributed.Client or a scheduler address"):
        get_client(client=3)


@pytest.mark.kernels
def test_projection_is_lazy_with_the_rows_chunks_of_x(threads_scheduler):
    x, _ = drifting_pair(n=500, p=12)
    anchors = x[::50]
    xd = da.from_array(x, chunks=(120, 5))
    out = relative_projection(xd, anchors, "euclidean")
    assert is_dask_array(out)
    assert out.chunks == (xd.chunks[0], (anchors.shape[0],))
    assert relative_error(out.compute(), relative_projection(x, anchors, "euclidean")) < 1e-12


def test_projection_errors_name_rows_of_the_whole_array(threads_scheduler):
    x, _ = drifting_pair(n=500, p=12)
    x[333, 4] = np.nan
    with pytest.raises(ValueError, match=r"x: contains NaN or inf \(first at row 333\)"):
        relative_projection(da.from_array(x, chunks=100), x[:5]).compute()
    with pytest.raises(ValueError, match="x and anchors must have the same number of features"):
        relative_projection(da.from_array(x, chunks=100), x[:5, :3])
    with pytest.raises(ValueError, match="unknown similarity"):
        relative_projection(da.from_array(x, chunks=100), x[:5], "cosinus")


def test_a_zero_row_is_named_by_its_row_of_the_whole_array(threads_scheduler):
    x, _ = drifting_pair(n=500, p=12)
    x[333] = 0.0  # in the fourth block of 100 rows: row 33 of the block, row 333 of x
    with pytest.raises(ZeroNormError, match="x: row 333 has zero norm"):
        relative_projection(da.from_array(x, chunks=100), x[:5]).compute()


def test_an_error_in_a_block_says_which_rows(threads_scheduler):
    x, y = drifting_pair(n=600)
    x[333, 2] = np.nan
    with pytest.raises(ValueError, match=r"a: contains NaN or inf \(first at row 33\)") as raised:
        LeastSquares().fit(da.from_array(x, chunks=100), y)
    if sys.version_info >= (3, 11):  # exception notes
        assert raised.value.__notes__ == ["(in the block of rows 300:400 of the dask array; rows above count from 300)"]


def test_dask_inputs_are_checked_before_computing(threads_scheduler):
    x, y = drifting_pair(n=300)
    with pytest.raises(ValueError, match="a and b must have the same number of samples"):
        LeastSquares().fit(da.from_array(x), y[:200])
    with pytest.raises(TypeError, match="a: expected a floating-point array, got dtype int64"):
        LeastSquares().fit(da.from_array(x.astype(np.int64)), y)
    with pytest.raises(ValueError, match="x: has 5 features but LeastSquares was fitted on 24"):
        LeastSquares().fit(x, y).transform(da.from_array(x[:, :5]))


@pytest.mark.kernels
def test_feature_maps_and_a_numpy_partner(threads_scheduler):
    """(N, C, H, W) activations are matched per position; a numpy array paired with a dask array follows its
    chunks."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((60, 6, 3, 4))
    b = np.einsum("nchw,cd->ndhw", a, rng.standard_normal((6, 5))) + 0.1 * rng.standard_normal((60, 5, 3, 4))
    expected = LeastSquares().fit(a, b)
    fitted = LeastSquares().fit(da.from_array(a, chunks=(13, 2, 3, 4)), b)
    assert relative_error(fitted.coef_, expected.coef_) < 1e-10
    mapped = fitted.transform(da.from_array(a, chunks=(25, 6, 3, 4)))
    assert mapped.shape == b.shape
    assert relative_error(mapped.compute(), expected.transform(a)) < 1e-10


@pytest.mark.kernels
def test_sparse_lasso_and_minibatch_cka_take_dask_arrays(threads_scheduler):
    """Every moment-based stitcher takes dask arrays (Lasso: same statistics, same solver); minibatch CKA takes
    each block of rows as one minibatch."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((600, 10))
    y = x[:, :4] @ rng.standard_normal((4, 3)) + 0.1 * rng.standard_normal((600, 3))
    expected = SparseLasso(alpha=0.05).fit(x, y)
    assert relative_error(SparseLasso(alpha=0.05).fit(da.from_array(x, chunks=100), y).coef_, expected.coef_) < 1e-8
    batches = sim.StreamingMinibatchCKA()
    for start in range(0, 600, 150):
        batches.update(x[start : start + 150], y[start : start + 150])
    blocks = sim.StreamingMinibatchCKA().update(da.from_array(x, chunks=150), y)
    assert blocks.batches == 4
    assert blocks.compute() == pytest.approx(batches.compute(), rel=1e-12)


@pytest.mark.parametrize(
    ("make", "one_shot"),
    [
        (sim.StreamingSVCCA, sim.svcca),
        (sim.StreamingPWCCA, sim.pwcca),
        (lambda: sim.StreamingProcrustes("angular"), sim.shape_metric_angular),
    ],
    ids=["svcca", "pwcca", "angular"],
)
@pytest.mark.kernels
def test_other_streaming_measures_take_dask_arrays(threads_scheduler, make, one_shot):
    x, y = drifting_pair(n=900, p=12, q=12)
    assert make().update(da.from_array(x, chunks=200), y).compute() == pytest.approx(one_shot(x, y), rel=1e-9)


def test_unknown_chunk_sizes_are_an_error_naming_the_fix(threads_scheduler):
    x, _ = drifting_pair(n=200)
    xd = da.from_array(x, chunks=50)
    masked = xd[xd[:, 0] > 20]
    with pytest.raises(ValueError, match=r"x: has unknown chunk sizes .*x.compute_chunk_sizes\(\)"):
        sim.StreamingCKA().update(masked, masked)


# --- on a LocalCluster with two worker processes --------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    active = get_client(workers=2)  # LocalCluster(n_workers=2, threads_per_worker=1, processes=True)
    yield active
    active.close()


@pytest.mark.slow
def test_every_layer_pair_over_partitions_on_the_cluster_equals_one_pass(client):
    torch.manual_seed(0)
    model_a = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 6))
    model_b = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU())
    x = torch.randn(90, 5)
    batches = [x[k : k + 10] for k in range(0, 90, 10)]
    options = {"layers_a": ["0", "2"], "layers_b": ["0", "1"]}  # "0": rank 5 of 8 and of 7
    merged = sim.layer_moments_on_cluster(
        model_a, model_b, [batches[:4], batches[4:7], batches[7:]], client=client, progress=False, **options
    )
    whole = sim.layer_moments(model_a, model_b, batches, **options)
    assert merged.count == 90
    np.testing.assert_allclose(
        sim.layer_similarity_from_moments(merged, ["linear_cka", "mean_cca"]).values["mean_cca"],
        sim.layer_similarity_from_moments(whole, ["linear_cka", "mean_cca"]).values["mean_cca"],
        atol=1e-9,
    )


@pytest.mark.slow
def test_cluster_workers_run_torch_on_one_thread(client):
    assert len(client.scheduler_info()["workers"]) == 2
    assert set(client.run(torch.get_num_threads).values()) == {1}


@pytest.mark.slow
@pytest.mark.parametrize(("similarity", "center"), [("cosine", False), ("euclidean", True)])
def test_projection_on_the_cluster_equals_in_memory(client, similarity, center):
    x, _ = drifting_pair(dtype=np.float32)
    anchors = x[::97]
    out = relative_projection(da.from_array(x, chunks=400), anchors, similarity, center=center).compute()
    assert out.dtype == np.float32
    assert relative_error(out, relative_projection(x, anchors, similarity, center=center)) < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "dtype"),
    [
        (LeastSquares, np.float64),
        (LeastSquares, np.float32),
        (lambda: LeastSquares(ridge=3.0), np.float64),
        (lambda: Procrustes(center=True, scale=True), np.float64),
        (lambda: ReducedRank(rank=5), np.float64),
        (lambda: ReducedRank(rank=5), np.float32),
    ],
    ids=["least_squares", "least_squares_float32", "ridge", "procrustes", "reduced_rank", "reduced_rank_float32"],
)
def test_fits_on_the_cluster_equal_in_memory(client, make, dtype):
    x, y = drifting_pair(dtype=dtype)
    expected = make().fit(x, y)
    fitted = make().fit(da.from_array(x, chunks=(400, 7)), da.from_array(y, chunks=350))
    assert isinstance(fitted.coef_, np.ndarray)
    assert relative_error(fitted.coef_, expected.coef_) < 1e-6
    assert relative_error(fitted.intercept_, expected.intercept_) < 1e-6
    assert fitted.score(da.from_array(x, chunks=500), y) == pytest.approx(expected.score(x, y), rel=1e-6)


@pytest.mark.slow
def test_float32_procrustes_on_the_cluster_is_as_precise_as_its_products(client):
    """Procrustes takes each block's products in float32 (as scipy does), so two float32 fits that block the rows
    differently agree only to float32 resolution amplified by the SVD (the in-memory fit of these drifting rows is
    3.6e-5 from the float64 fit). Against the float64 fit of the same values the blockwise fit stays within 1e-5."""
    x, y = drifting_pair(dtype=np.float32)
    exact = Procrustes(center=True, scale=True).fit(x.astype(np.float64), y.astype(np.float64))
    fitted = Procrustes(center=True, scale=True).fit(da.from_array(x, chunks=400), da.from_array(y, chunks=400))
    assert relative_error(fitted.coef_, exact.coef_) < 1e-5


@pytest.mark.slow
def test_partial_fit_mixes_in_memory_and_dask_chunks(client):
    x, y = drifting_pair()
    stitch = LeastSquares().partial_fit(x[:1000], y[:1000])
    stitch.partial_fit(da.from_array(x[1000:], chunks=300), da.from_array(y[1000:], chunks=300))
    assert relative_error(stitch.coef_, LeastSquares().fit(x, y).coef_) < 1e-10


STREAMS = [
    (sim.StreamingCKA, sim.cka),
    (lambda: sim.StreamingCKA(debiased=True), lambda x, y: sim.cka(x, y, debiased=True)),
    (sim.StreamingR2, sim.r2_linear),
    (sim.StreamingCCA, sim.cca),
]


@pytest.mark.slow
@pytest.mark.parametrize(("make", "one_shot"), STREAMS, ids=["cka", "debiased_cka", "r2", "cca"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_streaming_measures_on_the_cluster_equal_in_memory(client, make, one_shot, dtype):
    x, y = drifting_pair(dtype=dtype)
    stream = make().update(x[:500], y[:500])  # an in-memory chunk first, then a dask array of the rest
    stream.update(da.from_array(x[500:], chunks=300), da.from_array(y[500:], chunks=(450, 16)))
    assert stream.count == x.shape[0]
    assert stream.compute() == pytest.approx(float(one_shot(x, y)), rel=1e-6)


@pytest.mark.slow
def test_pairwise_on_the_cluster_equals_in_process(client):
    x, y = drifting_pair(n=800)
    reps = {"x": x, "y": y, "x2": x**2, "torch": torch.from_numpy(y[:, :5])}
    for measure in ("linear_cka", "r2_linear"):  # symmetric and not
        expected = sim.pairwise(reps, measure)
        np.testing.assert_allclose(sim.pairwise(reps, measure, client=client, progress=False), expected, rtol=1e-12)


def _square_or_fail(value):
    if value == 3:
        raise ArithmeticError("three is not allowed")
    return value * value


@pytest.mark.slow
def test_pairwise_called_again_and_again_on_one_client_with_the_same_inputs(client):
    """Content-hashed scatter keys collided with the previous call's release of the same inputs ("lost
    dependencies", about 1 call in 20 here before the inputs were scattered with hash=False)."""
    x, y = drifting_pair(n=300)
    reps = {"x": x, "y": y, "x2": x**2}
    expected = sim.pairwise(reps, "linear_cka")
    for _ in range(20):
        again = sim.pairwise(reps, "linear_cka", client=client, progress=False)
        np.testing.assert_allclose(again, expected, rtol=1e-12)


def test_map_tasks_keeps_the_order_and_raises_the_first_failure(client):
    assert map_tasks(_square_or_fail, [5, 1, 4, 2], client=client, progress=False) == [25, 1, 16, 4]
    with pytest.raises(ArithmeticError, match="three is not allowed"):
        map_tasks(_square_or_fail, [1, 2, 3, 4], client=client, progress=False)


def _slowly(block):
    time.sleep(0.15)
    return block


@pytest.mark.slow
def test_a_killed_worker_does_not_change_the_result(client):
    """Kill one worker process mid-computation: dask recomputes its lost tasks and the result is unchanged."""
    x, y = drifting_pair(n=8000)
    expected = sim.cka(x, y)
    slow_x = da.from_array(x, chunks=200).map_blocks(_slowly, dtype=x.dtype)  # 40 blocks of >= 0.15 s each
    victim = sorted(client.scheduler_info()["workers"])[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    killed_at, held = [], []

    def kill():
        deadline = time.perf_counter() + 30
        while not client.has_what().get(victim) and time.perf_counter() < deadline:
            time.sleep(0.05)  # until the victim holds results of finished tasks
        held.append(len(client.has_what().get(victim, ())))
        os.kill(pid, signal.SIGKILL)  # the results it holds are lost; its nanny starts a new worker
        killed_at.append(time.perf_counter())

    killer = threading.Thread(target=kill)
    killer.start()
    value = sim.StreamingCKA().update(slow_x, y).compute()
    finished_at = time.perf_counter()
    killer.join()
    assert killed_at and killed_at[0] < finished_at
    assert held[0] > 0  # results on the killed worker had to be recomputed
    assert victim not in client.scheduler_info()["workers"]
    assert value == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_stitching_sweep_on_the_cluster_equals_in_process(client):
    """Each layer of a Frankenstein sweep (direct matching, then task loss from its least-squares fit) as a task."""
    from latentstitch.models import tiny10
    from latentstitch.stitching import TaskLoss, sweep

    torch.manual_seed(0)
    x = torch.randn(64, 1, 28, 28)
    labels = torch.randint(0, 10, (64,), generator=torch.Generator().manual_seed(1))
    model_a, model_b = tiny10(0.5).eval(), tiny10(0.5).eval()
    methods = {"LS": LeastSquares(), "task loss": TaskLoss(epochs=1, batch_size=16)}
    options = {"data": (x, labels), "eval_data": (x, labels), "progress": False}
    expected = sweep(model_a, model_b, ["bn3", "bn6"], methods, **options)
    result = sweep(model_a, model_b, ["bn3", "bn6"], methods, client=client, **options)
    assert [(r["layer"], r["method"]) for r in result.rows] == [(r["layer"], r["method"]) for r in expected.rows]
    for row, reference in zip(result.rows, expected.rows, strict=True):
        assert row["relative_accuracy"] == pytest.approx(reference["relative_accuracy"], abs=1e-6)
        assert row["cross_entropy"] == pytest.approx(reference["cross_entropy"], rel=1e-4)
    weight = result.stitching_layers["bn6", "task loss"].weight
    np.testing.assert_allclose(
        weight.detach(), expected.stitching_layers["bn6", "task loss"].weight.detach(), atol=1e-4
    )


def _seeded_draws(config):
    rng = np.random.default_rng(config["seed"])
    return config["name"], rng.standard_normal(3) * config["scale"]


@pytest.mark.slow
def test_experiment_grids_run_on_the_cluster_like_in_process(client):
    """``reproduce NAME --workers N`` puts the grid experiments' runs on a cluster through map_grid."""
    from latentstitch.experiments._grid import grid_cluster, map_grid

    configs = [{"name": f"run{i}", "seed": i, "scale": 1 + i} for i in range(5)]
    expected = map_grid(_seeded_draws, configs, progress=False)
    with grid_cluster(client) as active:
        assert active is client
        on_cluster = map_grid(_seeded_draws, configs, progress=False)
    assert [name for name, _ in on_cluster] == [f"run{i}" for i in range(5)]
    for (_, values), (_, reference) in zip(on_cluster, expected, strict=True):
        np.testing.assert_array_equal(values, reference)
    assert client.status == "running"  # a client passed in is left open


def test_grid_cluster_without_arguments_keeps_runs_in_process():
    from latentstitch.experiments._grid import grid_cluster, map_grid

    with grid_cluster() as active:
        assert active is None
        assert map_grid(os.getpid, [], progress=False) == []
        assert map_grid(lambda _: os.getpid(), [1, 2], progress=False) == [os.getpid()] * 2
