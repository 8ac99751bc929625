"""The Encoder interface: batching, order, input checks, the safetensors cache (with a counting stand-in model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from latentstitch.data import WordVectors
from latentstitch.encoders import CACHE_ENV, ENCODERS, Encoder, WordVectorEncoder, default_cache_dir, get_encoder


class CountingTextEncoder(Encoder):
    """Deterministic stand-in: embeds a text as (length, number of vowels, first code point); counts its calls."""

    name = "counting"
    dim = 3
    version = "1.0"
    supports_layers = True
    _sort_by_length = True

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self.batches: list[list[str]] = []

    def options(self):
        return {"scale": self.scale}

    def _encode_batch(self, batch, layers):
        self.batches.append(list(batch))
        out = np.asarray(
            [[len(t), sum(c in "aeiou" for c in t), ord(t[0]) if t else 0] for t in batch], dtype=np.float64
        )
        out = out * self.scale
        return [out[:, :1], out] if layers else out


class MeanImageEncoder(Encoder):
    name = "mean-image"
    dim = 1
    version = "0"
    modality = "image"

    def _encode_batch(self, batch, layers):
        return batch.mean(axis=(1, 2, 3))[:, None]


TEXTS = ["a", "banana split", "kiwi", "", "pear and apple", "fig"]


def expected(texts, scale=1.0):
    return np.asarray([[len(t), sum(c in "aeiou" for c in t), ord(t[0]) if t else 0] for t in texts]) * scale


def test_batches_are_sorted_by_length_and_the_order_is_restored():
    encoder = CountingTextEncoder()
    out = encoder.encode(TEXTS, batch_size=4, progress=False)
    assert out.dtype == np.float32 and out.shape == (6, 3)
    assert np.array_equal(out, expected(TEXTS).astype(np.float32))
    assert [len(b) for b in encoder.batches] == [4, 2]
    assert encoder.batches[0][0] == "pear and apple"  # longest first: similar lengths share a batch


def test_layers_are_returned_per_layer_in_input_order():
    layers = CountingTextEncoder().encode(TEXTS, batch_size=4, progress=False, layers=True)
    assert [a.shape for a in layers] == [(6, 1), (6, 3)]
    assert np.array_equal(layers[1], expected(TEXTS))
    with pytest.raises(ValueError, match="no per-layer hidden states"):
        MeanImageEncoder().encode(np.zeros((1, 1, 2, 2), np.float32), layers=True)


def test_progress_bar_does_not_change_the_output(capsys):
    assert np.array_equal(CountingTextEncoder().encode(TEXTS, progress=True), expected(TEXTS).astype(np.float32))


def test_second_call_reads_the_cache_and_runs_no_model(tmp_path):
    encoder = CountingTextEncoder()
    first = encoder.encode(TEXTS, cache=tmp_path, progress=False)
    calls = len(encoder.batches)
    second = encoder.encode(TEXTS, cache=tmp_path, progress=False)
    assert len(encoder.batches) == calls and np.array_equal(first, second)
    path = encoder.cache_path(TEXTS, cache=tmp_path)
    assert path.exists() and path.suffix == ".safetensors" and path.parent.name == "counting"
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        assert f.metadata() == {"encoder": "counting", "version": "1.0", "count": "6"}
    layers = encoder.encode(TEXTS, cache=tmp_path, progress=False, layers=True)
    again = encoder.encode(TEXTS, cache=tmp_path, progress=False, layers=True)
    assert len(again) == 2 and all(np.array_equal(a, b) for a, b in zip(layers, again, strict=True))


def test_cache_key_depends_on_inputs_version_and_options(tmp_path):
    base = CountingTextEncoder()
    key = base.cache_key(TEXTS, False)
    assert key != base.cache_key(TEXTS[:-1], False)
    assert base.cache_key(["ab", "c"], False) != base.cache_key(["a", "bc"], False)  # text boundaries count
    assert key != base.cache_key(TEXTS, True)
    assert key != CountingTextEncoder(scale=2.0).cache_key(TEXTS, False)
    other = CountingTextEncoder()
    other.version = "2.0"
    assert key != other.cache_key(TEXTS, False)
    # no false hit: a changed option re-encodes and gives its own result
    base.encode(TEXTS, cache=tmp_path, progress=False)
    scaled = CountingTextEncoder(scale=2.0).encode(TEXTS, cache=tmp_path, progress=False)
    assert np.array_equal(scaled, expected(TEXTS, 2.0).astype(np.float32))


def test_default_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    CountingTextEncoder().encode(TEXTS, cache=True, progress=False)
    assert len(list((tmp_path / "here" / "counting").glob("*.safetensors"))) == 1
    monkeypatch.delenv(CACHE_ENV)
    assert default_cache_dir().parts[-2:] == (".cache", "latentstitch")
    assert CountingTextEncoder().cache_path(TEXTS, cache=None) is None


def test_inputs_are_checked_with_clear_errors():
    encoder = CountingTextEncoder()
    with pytest.raises(TypeError, match="single string"):
        encoder.encode("just one", progress=False)
    with pytest.raises(TypeError, match="got int at position 1"):
        encoder.encode(["a", 3], progress=False)
    with pytest.raises(ValueError, match="at least one string"):
        encoder.encode([], progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(TEXTS, batch_size=0, progress=False)
    images = MeanImageEncoder()
    with pytest.raises(ValueError, match=r"pixel values in \[0, 1\]"):
        images.encode(np.full((2, 1, 4, 4), 255.0, np.float32), progress=False)
    with pytest.raises(ValueError, match="4-D"):
        images.encode(np.zeros((2, 4, 4), np.float32), progress=False)
    with pytest.raises(ValueError, match="C = 1 or 3"):
        images.encode(np.zeros((2, 5, 4, 4), np.float32), progress=False)


def test_image_inputs_accept_numpy_and_torch_alike():
    x = np.random.default_rng(0).random((5, 3, 4, 4)).astype(np.float32)
    a = MeanImageEncoder().encode(x, batch_size=2, progress=False)
    b = MeanImageEncoder().encode(torch.from_numpy(x), batch_size=2, progress=False)
    assert np.allclose(a[:, 0], x.mean(axis=(1, 2, 3))) and np.array_equal(a, b)


def test_word_vector_encoder_lookup_and_unknown_words():
    table = WordVectors("toy", ("cat", "dog"), np.array([[1.0, 0.0], [0.0, 1.0]], np.float32), "1")
    assert np.array_equal(
        WordVectorEncoder(table).encode(["dog", "cat", "dog"], progress=False), [[0, 1], [1, 0], [0, 1]]
    )
    with pytest.raises(KeyError, match="'horse'"):
        WordVectorEncoder(table).encode(["cat", "horse"], progress=False)
    zero = WordVectorEncoder(table, unknown="zero").encode(["horse", "cat"], progress=False)
    assert np.array_equal(zero, [[0, 0], [1, 0]])


def test_registry_names_every_encoder():
    assert set(ENCODERS) == {
        "minilm-l6",
        "paraphrase-minilm-l3",
        "use-m3",
        "e5-small",
        "efficientnet-lite0",
        "efficientnet-lite1",
        "glove-50d",
        "spacy-en-md",
        "spacy-fr-md",
    }
    with pytest.raises(ValueError, match="unknown encoder 'bert'"):
        get_encoder("bert")
