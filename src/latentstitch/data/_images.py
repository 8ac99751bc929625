"""Image datasets that install from the package registries: Fashion-MNIST (Debian), sklearn digits, sample photos.

Every image loader returns (N, C, H, W) float32 arrays in [0, 1] and int64 labels.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from latentstitch._core.extras import require, require_file
from latentstitch._core.params import check_seed
from latentstitch.data._datasets import LabelledSplit, check_fraction, class_names, split_dataset, stratified_subset

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

# IDX type codes (LeCun's format description): third byte of the magic number.
_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (the MNIST format), gzip-compressed or not, into a numpy array of its stored shape.

    The header is two zero bytes, a type code, the number of dimensions, then one big-endian uint32 per dimension.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: {str(path)!r} is {'a folder' if path.is_dir() else 'missing'}, not an IDX file")
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise ValueError(f"path: {str(path)!r} could not be read ({type(error).__name__}: {error})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {raw[:4].hex()})")
    dtype, ndim = _IDX_DTYPES[raw[2]], raw[3]
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    offset = 4 + 4 * ndim
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - offset != expected:
        raise ValueError(f"{path}: header announces shape {shape} ({expected} bytes) but holds {len(raw) - offset}")
    return np.frombuffer(raw, dtype=dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


def images_to_float(images: np.ndarray) -> np.ndarray:
    """uint8 images (N, H, W) or (N, H, W, C) -> (N, C, H, W) float32 in [0, 1]."""
    if images.ndim == 3:
        images = images[:, None]
    elif images.ndim == 4:
        images = images.transpose(0, 3, 1, 2)
    else:
        raise ValueError(f"images: expected (N, H, W) or (N, H, W, C), got shape {images.shape}")
    return np.ascontiguousarray(images, dtype=np.float32) / np.float32(255.0)


def labelled_from_parts(
    name: str,
    parts: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    classes: tuple[str, ...],
    *,
    n_train: int | None,
    n_test: int | None,
    seed: int,
) -> LabelledSplit:
    """An official train/test split, optionally cut to stratified seeded subsets, as float images."""
    x_train, y_train, x_test, y_test = parts
    train = stratified_subset(y_train, n_train, seed, "n_train")
    test = stratified_subset(y_test, n_test, seed, "n_test")
    return LabelledSplit(
        name,
        images_to_float(x_train[train]),
        y_train[train].astype(np.int64),
        images_to_float(x_test[test]),
        y_test[test].astype(np.int64),
        classes,
    )


def load_fashion_mnist(
    *, n_train: int | None = None, n_test: int | None = None, seed: int = 0, root: str | os.PathLike | None = None
) -> LabelledSplit:
    """Fashion-MNIST (Xiao et al. 2017) from the Debian package ``dataset-fashion-mnist``: no download.

    The official split (60,000 train / 10,000 test); ``n_train`` / ``n_test`` keep stratified seeded subsets of it.
    Images are (N, 1, 28, 28) float32 in [0, 1]. ``root`` overrides the folder of the four IDX ``.gz`` files
    (default ``/usr/share/datasets/fashion-mnist``).
    """
    check_seed(seed)  # before the data is read
    folder = Path(root) if root is not None else FASHION_MNIST_DIR
    files = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
    parts = tuple(read_idx(require_file(folder / f"{f}.gz", "dataset-fashion-mnist")) for f in files)
    return labelled_from_parts("fashion-mnist", parts, FASHION_MNIST_CLASSES, n_train=n_train, n_test=n_test, seed=seed)


def load_sklearn_digits(*, test_size: float = 0.2, seed: int = 0) -> LabelledSplit:
    """scikit-learn's 1,797 handwritten 8x8 digits (UCI optdigits test set), shipped with scikit-learn.

    Images are (N, 1, 8, 8) float32 in [0, 1] (the stored 0..16 grey levels divided by 16); stratified split.
    """
    from sklearn.datasets import load_digits

    check_fraction(test_size, "test_size")
    check_seed(seed)

    digits = load_digits()
    images = (digits.images[:, None] / 16.0).astype(np.float32)
    return split_dataset(
        "sklearn-digits", images, digits.target, class_names(range(10)), test_size=test_size, seed=seed
    )


# ImageNet class indices of the sample photos (for sanity checks of pretrained image encoders).
SAMPLE_PHOTOS = {"chelsea": (281, 282, 283, 284, 285), "coffee": (967,)}  # cats: tabby..Egyptian cat; espresso


def load_sample_photos(names: tuple[str, ...] = ("chelsea", "coffee")) -> dict[str, np.ndarray]:
    """Real photographs shipped with scikit-image, as (3, H, W) float32 arrays in [0, 1].

    ``chelsea`` is a cat (ImageNet classes 281-285), ``coffee`` a cup of espresso (967): enough to check that a
    pretrained ImageNet encoder and its preprocessing are wired correctly. Needs ``latentstitch[vision]``.
    """
    skdata = require("skimage.data", "vision", package="scikit-image")
    photos = {}
    for name in names:
        if name not in SAMPLE_PHOTOS:
            raise ValueError(f"names: unknown photo {name!r}; expected some of {', '.join(SAMPLE_PHOTOS)}")
        photos[name] = images_to_float(getattr(skdata, name)()[None])[0]
    return photos
