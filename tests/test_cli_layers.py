"""``latentstitch layers``: two Hugging Face model folders over a text file give the JSON, one heatmap per measure
and a section of ``latentstitch report``; the values are ``layer_similarity``'s."""

from __future__ import annotations

import json

import numpy as np
import pytest

from latentstitch.cli import main
from latentstitch.cli.layers import MEASURES

transformers = pytest.importorskip("transformers")


def test_the_cli_knows_the_library_s_layer_measures():
    from latentstitch.similarity import LAYER_MEASURES

    assert MEASURES == tuple(LAYER_MEASURES)


def tiny_bert(folder, seed: int, layers: int):
    """A small random BERT saved as a Hugging Face folder, with a word-level tokenizer over a few words."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(seed)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"the cat dog sat ran on a mat log big small red".split()]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]")
    config = transformers.BertConfig(
        vocab_size=len(words), hidden_size=16, num_hidden_layers=layers, num_attention_heads=2, intermediate_size=32
    )
    transformers.BertModel(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_two_model_folders_over_a_text_file(tmp_path, capsys):
    a, b = tiny_bert(tmp_path / "bert-a", 0, 2), tiny_bert(tmp_path / "bert-a-again", 0, 2)
    rng = np.random.default_rng(0)
    words = "the cat dog sat ran on a mat log big small red".split()
    lines = [" ".join(rng.choice(words, rng.integers(2, 8))) for _ in range(120)]
    data = tmp_path / "sentences.txt"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    arguments = ["layers", str(a), str(b), "--data", str(data), "--out", str(out), "--quiet", "--batch-size", "16"]
    assert main([*arguments, "--measures", "linear_cka", "procrustes_distance"]) == 0
    written = json.loads((out / "layers.json").read_text())
    assert written["kind"] == "layers"
    result = written["result"]
    assert result["layers_a"] == ["embeddings", "encoder.layer.0", "encoder.layer.1"]
    assert result["layers_b"] == result["layers_a"] and result["samples"] == 120
    cka = np.array(result["values"]["linear_cka"])
    assert cka.shape == (3, 3) and np.all((cka >= 0) & (cka <= 1 + 1e-9))
    np.testing.assert_allclose(np.diag(cka), 1.0, atol=1e-6)  # the same model twice: each layer matches itself
    for name in ("layers_linear_cka.png", "layers_procrustes_distance.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert "most alike" in printed
    # the same model twice: every layer is significantly alike itself (closed-form p, Holm over the 9 pairs)
    corrected = np.array(result["p_corrected"]["linear_cka"])
    assert np.all(np.diag(corrected) < 0.05)
    count = int((corrected < 0.05).sum())
    assert f"linear_cka: {count} of 9 layer pairs significant" in printed and "skewness exact" in printed

    from latentstitch.report import write_report

    page = write_report(out, tmp_path / "report.html").read_text()
    assert "Layer similarity: bert-a vs bert-a-again" in page and "encoder.layer.1" in page


def test_the_output_may_not_overwrite_the_data(tmp_path, capsys):
    data = tmp_path / "layers.json"  # the inputs, where the results would go
    data.write_text("a cat sat\na dog ran\n")
    assert main(["layers", "minilm-l6", "minilm-l6", "--data", str(data), "--out", str(tmp_path), "--quiet"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--out" in error[0] and "--data" in error[0]
    assert data.read_text() == "a cat sat\na dog ran\n"


def test_a_measure_undefined_on_every_layer_pair_is_reported_and_the_others_written(tmp_path, capsys):
    """Fewer inputs than a layer's width + 1: SVCCA (a fitted measure) matches anything on every pair and is NaN
    throughout; linear CKA is still defined. The run writes layers.json with both, and a note names SVCCA and why,
    instead of failing on the empty heatmap after the PNGs ("All-NaN slice encountered")."""
    a, b = tiny_bert(tmp_path / "bert-a", 0, 1), tiny_bert(tmp_path / "bert-b", 1, 1)
    data = tmp_path / "sentences.txt"
    data.write_text("\n".join(["the cat sat", "a dog ran", "the big mat", "a red log", "small cat ran on a mat"] * 2))
    out = tmp_path / "out"
    arguments = ["layers", str(a), str(b), "--data", str(data), "--out", str(out), "--quiet"]
    assert main([*arguments, "--measures", "linear_cka", "svcca"]) == 0
    written = json.loads((out / "layers.json").read_text())
    values = written["result"]["values"]
    assert np.isfinite(np.array(values["linear_cka"], dtype=float)).all()
    assert np.isnan(np.array(values["svcca"], dtype=float)).all()
    summary = [note for note in written["notes"] if note.startswith("svcca: no layer pair")]
    assert len(summary) == 1 and "10 rows for 16 and 16 features" in summary[0]
    printed = " ".join(capsys.readouterr().out.split())  # the notes are wrapped at the console's width
    assert summary[0] in printed and "most alike: embeddings" in printed  # linear CKA's table keeps its best pair
    assert (out / "layers_svcca.png").read_bytes()[:4] == b"\x89PNG"
