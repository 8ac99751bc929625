"""Saved estimators: one safetensors file, and every damaged or foreign file is refused at load time with one error
naming the path and what is wrong (never at the next transform)."""

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from latentstitch import LatentTranslator, LeastSquares, StandardScaling
from latentstitch._core.persist import load


def _fitted(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(40, 3)), rng.normal(size=(40, 2))
    path = tmp_path / "model.safetensors"
    LeastSquares().fit(a, b).save(path)
    return path


def _rewrite(path, change):
    """Read a saved file's tensors and header, apply ``change(tensors, header)``, write it back."""
    with safe_open(str(path), framework="pt") as handle:
        header = json.loads(handle.metadata()["latentstitch"])
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    change(tensors, header)
    save_file(tensors, str(path), metadata={"latentstitch": json.dumps(header)})


def test_round_trip_of_nested_estimators(tmp_path):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(60, 4)), rng.normal(size=(60, 3))
    translator = LatentTranslator().fit(a, b)
    translator.save(tmp_path / "t.safetensors")
    again = LatentTranslator.load(tmp_path / "t.safetensors")
    np.testing.assert_array_equal(again.transform(a), translator.transform(a))
    scaler = StandardScaling().fit(a)
    scaler.save(tmp_path / "s.safetensors")
    np.testing.assert_array_equal(StandardScaling.load(tmp_path / "s.safetensors").transform(a), scaler.transform(a))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda p: p.write_bytes(b""), "is empty"),
        (lambda p: p.write_bytes(p.read_bytes()[:40]), "not a readable safetensors file"),
        (lambda p: p.write_bytes(b"\xff" * 64), "not a readable safetensors file"),
        (lambda p: p.write_text("just some text, long enough to look like a header........"), "not a readable"),
    ],
)
def test_damaged_files_are_named(tmp_path, damage, message):
    path = _fitted(tmp_path)
    damage(path)
    with pytest.raises(ValueError, match=message) as info:
        load(path)
    assert str(path) in str(info.value)


def test_missing_path_and_folder_are_named(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load(tmp_path / "absent.safetensors")
    with pytest.raises(ValueError, match="is a folder"):
        load(tmp_path)


def _drop_tensor(tensors, header):
    del tensors["coef_"]


def _wrong_shape(tensors, header):
    tensors["coef_"] = torch.zeros(5, 5, dtype=torch.float64)


def _unknown_param(tensors, header):
    header["params"]["alpha_typo"] = {"value": 1.0}


def _shadowing(tensors, header):
    header["learned"]["transform"] = {"value": 1}


def _extra_tensor(tensors, header):
    tensors["payload"] = torch.zeros(3)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_drop_tensor, "names the tensor 'coef_' but the file does not hold it"),
        (_wrong_shape, "coef_ has shape"),
        (_unknown_param, "unknown parameter"),
        (_shadowing, "not a learned-state name"),
        (_extra_tensor, "tensors the header does not name: payload"),
    ],
)
def test_inconsistent_headers_are_refused_before_use(tmp_path, change, message):
    path = _fitted(tmp_path)
    _rewrite(path, change)
    with pytest.raises(ValueError, match=message):
        load(path)


def test_saving_into_a_missing_folder_names_the_folder(tmp_path):
    rng = np.random.default_rng(0)
    model = LeastSquares().fit(rng.normal(size=(10, 2)), rng.normal(size=(10, 2)))
    with pytest.raises(ValueError, match="does not exist"):
        model.save(tmp_path / "nowhere" / "model.safetensors")


def test_a_fresh_process_loads_a_class_whose_package_was_never_imported(tmp_path):
    """The package root imports lazily, so the reading process may not have imported the class's package yet."""
    import subprocess
    import sys

    path = tmp_path / "gpa.safetensors"
    make = (
        "import numpy as np; from latentstitch.alignment import GeneralizedProcrustes; "
        "rng = np.random.default_rng(0); "
        "GeneralizedProcrustes().fit([rng.normal(size=(50, 4)).astype(np.float32) for _ in range(3)])"
        f".save({str(path)!r})"
    )
    subprocess.run([sys.executable, "-c", make], check=True)
    read = f"from latentstitch._core.persist import load; print(type(load({str(path)!r})).__name__)"
    shown = subprocess.run([sys.executable, "-c", read], check=True, capture_output=True, text=True).stdout
    assert shown.strip() == "GeneralizedProcrustes"


def test_every_estimator_declares_a_rule_for_each_constructor_parameter():
    """Parameter checks are declared once per estimator (``_parameter_constraints``), for every parameter."""
    import inspect

    from latentstitch._core.persist import ESTIMATOR_PACKAGES, registered_classes

    assert {cls.__module__.rsplit(".", 1)[0] for cls in registered_classes().values()} <= set(ESTIMATOR_PACKAGES)
    for name, cls in registered_classes().items():
        signature = inspect.signature(cls.__init__)
        params = {p for p, v in signature.parameters.items() if p != "self" and v.kind is v.POSITIONAL_OR_KEYWORD}
        assert set(cls._parameter_constraints) == params, f"{name}: declare a rule for each of {sorted(params)}"
