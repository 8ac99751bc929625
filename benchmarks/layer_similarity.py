"""Every layer pair of two models in one pass (``similarity.layer_similarity``) against the two-step floor.

Two-step floor (what users do today): run each model over the inputs keeping every layer's pooled activations
(``output_hidden_states=True``, mean over the attention mask: N x d per layer in memory), then
``pairwise(layers_a, "linear_cka", against=layers_b)``. Ours: forward hooks on the same layers (the embeddings and
every block), one ``LayerMoments`` updated per batch, linear CKA of every pair from it; memory O(sum of d^2).

Part A, end to end: all-MiniLM-L6-v2 (7 hidden states) vs paraphrase-MiniLM-L3-v2 (4; its ONNX weights in a torch
BertModel) over N English sentences (BBC News sentences, then WEB Bible verses beyond their 38k), batches of 64,
tokenised once up front. Both methods run the same forward passes, which dominate the time.
Part B, the statistics alone (default 20k rows, ``--rows``): the same layer widths (7 + 4 layers of 384),
activations generated batch by batch (correlated across layers) and fed to ``LayerMoments`` vs collected and given
to ``pairwise``: isolates the cost of the similarity step, and the memory that grows with N.

Time: CPU seconds of this process (one thread; steadier than wall time on a shared machine), median of two rounds
that call the methods in turn (``_harness.interleaved_times``), and the median of the per-round ratios. Peak memory:
growth of the peak RSS in a fresh process while the method runs, over the level after models and inputs were built
(``_harness.peak_memory_mib``). Both parts check that the two methods give the same matrix.
"""

from __future__ import annotations

import time

import numpy as np
import torch

# The target is 50k sentences; on a shared 2-core machine the forward passes alone take ~0.2 s per sentence
# for both models, so the defaults are smaller: --sentences and --rows set them.
SENTENCES = {"full": 500, "quick": 128}
ROWS_B = {"full": 20_000, "quick": 5_000}
BATCH = 64
WIDTH, LAYERS = 384, (7, 4)


def add_arguments(parser) -> None:
    parser.add_argument("--sentences", type=int, default=None, help="N of part A (default 500; quick 128)")
    parser.add_argument("--rows", type=int, default=None, help="N of part B (default 20000; quick 5000)")


def sentences(n: int) -> list[str]:
    from latentstitch.data import bbc_news_sentences

    texts = bbc_news_sentences()
    if n > len(texts):
        from latentstitch.data import bible_verses

        texts += bible_verses({"en": "engWEB2015eb"})[0]["en"]
    if n > len(texts):
        raise ValueError(f"--sentences: at most {len(texts)} packaged sentences, asked for {n}")
    keep = np.random.default_rng(0).choice(len(texts), n, replace=False)
    return [texts[i] for i in keep]


def setup_models(n: int):
    from latentstitch.encoders import get_encoder, torch_model

    (model_a, prepare_a), (model_b, prepare_b) = (torch_model(get_encoder(name)) for name in ENCODERS)
    texts = sentences(n)
    batches = [(prepare_a(texts[s : s + BATCH]), prepare_b(texts[s : s + BATCH])) for s in range(0, n, BATCH)]
    return model_a, model_b, batches


ENCODERS = ("minilm-l6", "paraphrase-minilm-l3")


def ours_models(inputs) -> np.ndarray:
    from latentstitch.similarity import layer_similarity

    model_a, model_b, batches = inputs
    layers = [["embeddings", *(f"encoder.layer.{k}" for k in range(count))] for count in (6, 3)]
    result = layer_similarity(model_a, model_b, batches, layers_a=layers[0], layers_b=layers[1], separate_inputs=True)
    return result.values["linear_cka"]


def floor_models(inputs) -> np.ndarray:
    from latentstitch.encoders import mean_pool
    from latentstitch.similarity import pairwise

    model_a, model_b, batches = inputs
    collected: list[list[list[np.ndarray]]] = [[], []]
    with torch.no_grad():
        for pair in batches:
            for side, (model, tokens) in enumerate(zip((model_a, model_b), pair, strict=True)):
                states = model(**tokens, output_hidden_states=True).hidden_states
                pooled = [mean_pool(s, tokens["attention_mask"]).numpy() for s in states]
                if not collected[side]:
                    collected[side] = [[] for _ in pooled]
                for keep, layer in zip(collected[side], pooled, strict=True):
                    keep.append(layer)
    reps_a, reps_b = ([np.concatenate(parts) for parts in side] for side in collected)
    return pairwise(reps_a, "linear_cka", against=reps_b)


def setup_rows(rows: int) -> int:
    return rows


def generated_batches(rows: int):
    """Batches of activations of 7 + 4 layers of width 384, related across layers and models (seeded)."""
    generator = torch.Generator().manual_seed(0)
    mixes = [torch.randn(WIDTH, WIDTH, generator=generator) / WIDTH**0.5 for _ in range(sum(LAYERS))]
    for start in range(0, rows, 256):
        base = torch.randn(min(256, rows - start), WIDTH, generator=generator)
        layers = [base @ mix + 0.5 * torch.randn(base.shape, generator=generator) + 3.0 for mix in mixes]
        yield {f"a{k}": layers[k] for k in range(LAYERS[0])}, {f"b{k}": layers[LAYERS[0] + k] for k in range(LAYERS[1])}


def ours_rows(rows: int) -> np.ndarray:
    from latentstitch.similarity import LayerMoments, layer_similarity_from_moments

    moments = LayerMoments()
    for acts_a, acts_b in generated_batches(rows):
        moments.update(acts_a, acts_b)
    return layer_similarity_from_moments(moments).values["linear_cka"]


def floor_rows(rows: int) -> np.ndarray:
    from latentstitch.similarity import pairwise

    parts: dict[str, list[np.ndarray]] = {}
    for acts_a, acts_b in generated_batches(rows):
        for name, value in {**acts_a, **acts_b}.items():
            parts.setdefault(name, []).append(value.numpy())
    reps = {name: np.concatenate(chunks) for name, chunks in parts.items()}
    reps_a = [reps[f"a{k}"] for k in range(LAYERS[0])]
    reps_b = [reps[f"b{k}"] for k in range(LAYERS[1])]
    return pairwise(reps_a, "linear_cka", against=reps_b)


def run(args) -> None:
    from benchmarks._harness import interleaved_times, median_ratio, peak_memory_mib, print_table

    size = "quick" if args.quick else "full"
    n = args.sentences or SENTENCES[size]
    rows_b = args.rows or ROWS_B[size]
    rounds = min(args.repeats, 2)  # long runs: two interleaved rounds, CPU time (one thread: steady under load)
    table = []
    inputs = setup_models(n)
    for part, (floor, ours, setup, kwargs, label) in {
        "A": (floor_models, ours_models, "setup_models", {"n": n}, f"{n} sentences, L6 x L3 models"),
        "B": (floor_rows, ours_rows, "setup_rows", {"rows": rows_b}, f"{rows_b} rows, statistics only"),
    }.items():
        given = inputs if part == "A" else rows_b
        matrices = {}

        def keep(method, name, given=given, matrices=matrices):
            return lambda: matrices.__setitem__(name, method(given))

        times = interleaved_times(
            {"floor": keep(floor, "floor"), "ours": keep(ours, "ours")}, rounds, warmup=0, clock=time.process_time
        )
        floor_mib = peak_memory_mib(__name__, setup, floor.__name__, args.threads, **kwargs)
        ours_mib = peak_memory_mib(__name__, setup, ours.__name__, args.threads, **kwargs)
        difference = float(np.max(np.abs(matrices["floor"] - matrices["ours"])))
        floor_seconds, ours_seconds = (float(np.median(times[name])) for name in ("floor", "ours"))
        ratio = median_ratio(times, "ours", "floor")
        table.append([label, floor_seconds, ours_seconds, ratio, floor_mib, ours_mib, f"{difference:.1e}"])
    print_table(
        f"layer_similarity: every layer pair (linear CKA, 7 x 4 layers of 384) vs collect-then-pairwise; CPU seconds, "
        f"median of {rounds} interleaved rounds",
        ["part", "floor s", "ours s", "ours / floor", "floor peak MiB", "ours peak MiB", "max |diff|"],
        table,
    )
