"""``latentstitch bridge fit / apply / routes`` and ``latentstitch compare`` on files, as a user runs them; every bad
input is one line on stderr with exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from synthetic_pairs import rotated_scaled_shifted

from latentstitch.bridge import Bridge
from latentstitch.cli import main


@pytest.fixture
def files(tmp_path):
    source, target, image = rotated_scaled_shifted(0, n=140)
    np.save(tmp_path / "new.npy", source[:100])
    np.save(tmp_path / "old.npy", target[:100])
    np.save(tmp_path / "fresh.npy", source[100:])
    return tmp_path, image(source[100:])


def _one_line_error(capsys, argv, *names):
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse's own errors (bad option values) exit directly
        code = exit_info.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for name in names:
        assert name in err[0], err[0]
    return err[0]


def test_fit_prints_the_route_table_saves_the_bridge_and_a_json_report_then_apply_bridges(files, capsys):
    folder, expected = files
    argv = ["bridge", "fit", str(folder / "new.npy"), str(folder / "old.npy"), "-o", str(folder / "b.safetensors")]
    assert main([*argv, "--quiet", "--budget", "20", "40", "--routes", "procrustes", "relative_centered"]) == 0
    printed = capsys.readouterr().out
    assert "Bridge routes" in printed and "procrustes" in printed and "Chosen: " in printed
    assert printed.index("Expected quality: ") < printed.index("Bridge routes")  # what the user gets, first
    report = json.loads((folder / "b.json").read_text())
    assert report["kind"] == "bridge" and report["choice"]["route"] in ("procrustes", "relative_centered")
    routes_table, budget = report["tables"]
    assert routes_table["columns"][:5] == ["route", "family", "parameters", "MRR", "top-1"]
    assert len(routes_table["rows"]) == 2 and [row[0] for row in budget["rows"]][:2] == [20, 40]
    mean, std = routes_table["rows"][0][3]  # cells of scores are [mean, std]
    assert 0 <= mean <= 1 and std >= 0
    bridge = Bridge.load(folder / "b.safetensors")
    out = folder / "bridged.npy"
    assert (
        main(["bridge", "apply", str(folder / "b.safetensors"), str(folder / "fresh.npy"), "-o", str(out), "--quiet"])
        == 0
    )
    np.testing.assert_allclose(np.load(out), bridge.transform(np.load(folder / "fresh.npy")), rtol=1e-6)
    if bridge.family_ == "translation":
        assert np.abs(np.load(out) - expected).mean() < 0.2 * np.abs(expected).mean()


def test_apply_to_the_old_models_vectors_gives_what_a_relative_head_is_trained_on(files, capsys):
    folder, _ = files
    bridge_path = folder / "rel.safetensors"
    fit = ["bridge", "fit", str(folder / "new.npy"), str(folder / "old.npy"), "-o", str(bridge_path)]
    assert main([*fit, "--routes", "relative_robust", "--no-budget", "--quiet", "--json", str(folder / "r.json")]) == 0
    out = folder / "target_relative.parquet"
    pytest.importorskip("pyarrow", reason="needs pip install 'latentstitch[files]'")
    assert (
        main(["bridge", "apply", str(bridge_path), str(folder / "old.npy"), "--target", "-o", str(out), "--quiet"]) == 0
    )
    from latentstitch.embeddings import read_embeddings

    expected = Bridge.load(bridge_path).transform_target(np.load(folder / "old.npy"))
    np.testing.assert_allclose(read_embeddings(out).vectors, expected, rtol=1e-6)
    assert "written" in capsys.readouterr().out


def test_routes_lists_the_registry(capsys):
    assert main(["bridge", "routes"]) == 0
    out = capsys.readouterr().out
    for name in ("ridge", "procrustes", "relative_robust", "least_squares"):
        assert name in out


def test_compare_prints_measures_and_refuses_meaningless_fitted_values(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.normal(size=(40, 64)).astype(np.float32))
    np.save(tmp_path / "b.npy", rng.normal(size=(40, 64)).astype(np.float32))
    argv = ["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--quiet", "--json", str(tmp_path / "c.json")]
    assert main([*argv, "--measures", "linear_cka", "r2_linear", "mean_cca"]) == 0
    out = capsys.readouterr().out
    assert "N = 40 items <= d + 1 = 65" in out
    result = json.loads((tmp_path / "c.json").read_text())
    assert result["kind"] == "compare" and result["values"]["r2_linear"] is None  # never a meaningless 1.0
    assert 0 < result["values"]["linear_cka"] < 1


def test_compare_permutations_tell_a_real_similarity_from_one_of_unpaired_rows(tmp_path, capsys):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(200, 10)).astype(np.float32)
    np.save(tmp_path / "a.npy", x)
    np.save(tmp_path / "related.npy", np.tanh(x @ rng.normal(size=(10, 6))).astype(np.float32))
    np.save(tmp_path / "unrelated.npy", rng.normal(size=(200, 6)).astype(np.float32))
    results = {}
    for other in ("related", "unrelated"):
        argv = ["compare", str(tmp_path / "a.npy"), str(tmp_path / f"{other}.npy"), "--quiet", "--permutations", "99"]
        assert main([*argv, "--measures", "linear_cka", "mutual_knn", "--json", str(tmp_path / f"{other}.json")]) == 0
        assert "p-value" in capsys.readouterr().out
        results[other] = json.loads((tmp_path / f"{other}.json").read_text())["permutation_tests"]
    # mutual_knn draws its 99 shuffles and beats them all: 1 / (99 + 1); linear CKA's null is in closed form
    assert results["related"]["mutual_knn"]["p_value"] == pytest.approx(0.01)
    assert results["related"]["linear_cka"]["p_value"] < 1e-6
    for name in ("linear_cka", "mutual_knn"):
        # unpaired rows: the calibrated value is the null's own spread (~0.01 at N = 200), far from a real one
        assert abs(results["unrelated"][name]["calibrated"]) < 0.1 < results["related"][name]["calibrated"]


def test_compare_subsamples_the_quadratic_measures(tmp_path, capsys):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(120, 8)).astype(np.float32)
    np.save(tmp_path / "a.npy", x)
    np.save(tmp_path / "b.npy", x @ rng.normal(size=(8, 8)).astype(np.float32))
    argv = ["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--quiet", "--max-rows", "50"]
    assert main([*argv, "--measures", "rsa", "linear_cka"]) == 0
    assert "on a random 50 of the 120 items" in capsys.readouterr().out


def test_every_bad_input_is_one_line_with_exit_code_2(files, capsys, tmp_path):
    folder, _ = files
    new, old, out = str(folder / "new.npy"), str(folder / "old.npy"), str(folder / "b.safetensors")
    _one_line_error(capsys, ["bridge", "fit", str(folder / "missing.npy"), old, "-o", out], "SOURCE", "no such file")
    np.savez(folder / "keys.npz", first=np.load(new), second=np.load(new))
    _one_line_error(
        capsys,
        ["bridge", "fit", str(folder / "keys.npz"), old, "-o", out, "--key", "third"],
        "SOURCE",
        "has no array 'third'",
    )
    np.save(folder / "short.npy", np.load(old)[:90])
    _one_line_error(
        capsys,
        ["bridge", "fit", new, str(folder / "short.npy"), "-o", out],
        "SOURCE, TARGET",
        "rows are paired by order",
    )
    bad = np.load(old)
    bad[42, 1] = np.inf
    np.save(folder / "inf.npy", bad)
    _one_line_error(capsys, ["bridge", "fit", new, str(folder / "inf.npy"), "-o", out], "TARGET", "row 42")
    np.save(folder / "few_new.npy", np.load(new)[:12])
    np.save(folder / "few_old.npy", np.load(old)[:12])
    _one_line_error(
        capsys,
        ["bridge", "fit", str(folder / "few_new.npy"), str(folder / "few_old.npy"), "-o", out],
        "cv:",
        "at least 25 paired rows; got 12",
    )
    _one_line_error(capsys, ["bridge", "fit", new, old, "-o", str(folder / "b.npy")], "--output", ".safetensors")
    _one_line_error(capsys, ["bridge", "fit", new, old, "-o", out, "--routes", "nope"], "unknown route 'nope'")
    _one_line_error(capsys, ["bridge", "fit", new, old, "-o", out, "--cv", "0"], "--cv")
    _one_line_error(capsys, ["bridge", "fit", new, old, "-o", out, "--cv", "1"], "cv: expected an integer >= 2")
    (folder / "ragged.csv").write_text("dim_0,dim_1\n1,2\n3\n")
    _one_line_error(capsys, ["compare", str(folder / "ragged.csv"), old], "A:", "ragged rows")
    (folder / "a_ids.csv").write_text("id,dim_0\nx,1\ny,2\n")
    (folder / "b_ids.csv").write_text("id,dim_0\nx,1\nz,2\n")
    _one_line_error(
        capsys,
        ["compare", str(folder / "a_ids.csv"), str(folder / "b_ids.csv"), "--id-column", "id"],
        "the ids do not match",
    )
    _one_line_error(capsys, ["compare", new, old, "--measures", "nope"], "--measures", "unknown measure")
    _one_line_error(capsys, ["compare", new, old, "--permutations", "-5"], "--permutations", "an integer >= 0")
    _one_line_error(
        capsys,
        ["bridge", "apply", str(folder / "nothing.safetensors"), new, "-o", str(tmp_path / "o.npy")],
        "BRIDGE",
        "no such file",
    )
    (folder / "fake.safetensors").write_bytes(b"not a bridge")
    _one_line_error(
        capsys, ["bridge", "apply", str(folder / "fake.safetensors"), new, "-o", str(tmp_path / "o.npy")], "BRIDGE"
    )
    assert main(["bridge", "fit", new, old, "-o", out, "--routes", "procrustes", "--no-budget", "--quiet"]) == 0
    capsys.readouterr()
    np.save(folder / "wide.npy", np.zeros((5, 7), np.float32))
    _one_line_error(
        capsys,
        ["bridge", "apply", out, str(folder / "wide.npy"), "-o", str(tmp_path / "o.npy")],
        "NEW",
        "has 7 features but the bridge expects the new model's 24-feature vectors",
    )
    _one_line_error(capsys, ["bridge", "apply", out, new, "-o", new], "--output", "is the input NEW")


def test_fit_with_a_target_pool_ranks_the_anchors_among_the_old_index(files, capsys, monkeypatch):
    folder, _ = files
    rng = np.random.default_rng(1)
    old = np.load(folder / "old.npy")
    index = np.concatenate([old, old[:60] + 0.3 * rng.normal(size=(60, old.shape[1]))]).astype(old.dtype)
    np.save(folder / "index.npy", index)
    argv = ["bridge", "fit", str(folder / "new.npy"), str(folder / "old.npy"), "-o", str(folder / "b.safetensors")]
    argv += ["--quiet", "--no-budget", "--routes", "procrustes", "--target-pool", str(folder / "index.npy")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "index.npy: 160 x" in printed and "the target pool" in printed
    # the anchors' own rows in the index are left out: 100 anchors + 60 others searched
    assert Bridge.load(folder / "b.safetensors").estimate_.pool == 160
    # a large file: only the drawn rows are read, the same rows the library would draw
    from latentstitch.bridge import _pool

    monkeypatch.setattr(_pool, "MAX_POOL", 30)
    (folder / "b.safetensors").unlink()
    (folder / "b.json").unlink()
    assert main(argv) == 0
    assert "130 rows drawn at random" in capsys.readouterr().out
    assert Bridge.load(folder / "b.safetensors").estimate_.pool == 130


def test_a_bad_target_pool_is_one_line_naming_the_option(files, capsys):
    folder, _ = files
    np.save(folder / "narrow.npy", np.zeros((20, 3), dtype=np.float32))
    argv = ["bridge", "fit", str(folder / "new.npy"), str(folder / "old.npy"), "--quiet", "--no-budget"]
    out = ["-o", str(folder / "b.safetensors")]
    _one_line_error(capsys, [*argv, *out, "--target-pool", str(folder / "missing.npy")], "--target-pool")
    _one_line_error(capsys, [*argv, *out, "--target-pool", str(folder / "narrow.npy")], "--target-pool", "3 features")
    clash = ["-o", str(folder / "b.safetensors"), "--json", str(folder / "narrow.npy")]
    _one_line_error(capsys, [*argv, *clash, "--target-pool", str(folder / "narrow.npy")], "--json")


def test_fit_on_a_constant_file_is_one_line_naming_the_file(files, capsys):
    folder, _ = files
    np.save(folder / "const.npy", np.ones((100, 24), dtype=np.float32))
    argv = ["bridge", "fit", str(folder / "const.npy"), str(folder / "old.npy"), "-o", str(folder / "c.safetensors")]
    line = _one_line_error(capsys, [*argv, "--quiet"], "SOURCE", "const.npy", "every feature is constant")
    assert "TARGET" not in line
    argv = ["bridge", "fit", str(folder / "new.npy"), str(folder / "const.npy"), "-o", str(folder / "c.safetensors")]
    _one_line_error(capsys, [*argv, "--quiet"], "TARGET", "const.npy", "every feature is constant")


def test_fit_on_unpaired_rows_says_so_naming_id_column_as_compare_does(tmp_path, capsys):
    """Issue 41: `bridge fit a.npy b_shuffled.npy` said nothing while `compare` warned. Under shuffled rows the
    pairing check's p-value is uniform: it warns with probability 0.95 per seed, so 3 of 5 seeds must warn (a
    chance failure has probability about 0.001); every fit is unreliable and every warning names --id-column."""
    warned = 0
    for seed in range(5):
        source, target, _ = rotated_scaled_shifted(seed, n=100)
        np.save(tmp_path / "a.npy", source)
        np.save(tmp_path / "b.npy", target[np.random.default_rng(seed).permutation(100)])
        out = tmp_path / f"b{seed}.safetensors"
        argv = ["bridge", "fit", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "-o", str(out), "--quiet"]
        assert main([*argv, "--no-budget", "--routes", "ridge_raw", "relative_centered"]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        assert not Bridge.load(out).reliable_ and "NOT clearly better than shuffled pairs" in printed
        if "rows look unpaired" in printed:
            warned += 1
            assert "--id-column" in printed and "source_ids" not in printed
        assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--measures", "linear_cka"]) == 0
        said_by_compare = "rows look unpaired" in capsys.readouterr().out
        assert said_by_compare == ("rows look unpaired" in printed)  # one check, one answer
    assert warned >= 3
