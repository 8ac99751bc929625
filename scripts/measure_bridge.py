"""Measure the bridge on real encoder pairs: every route's zero-shot accuracy, the route Bridge picks, and how close
it comes to the weaker encoder's own accuracy.

    PYTHONPATH=src nice -n 10 .venv/bin/python scripts/measure_bridge.py [--seeds 0 1 2] [--out results/bridge]

Pairs (cached embeddings, ``latentstitch.encoders``' safetensors cache; encoded on first use):

- text: BBC News (1,200 articles cut to 500 characters, the cross-architecture-text reproduction's set), MiniLM-L6
  (384-d) and multilingual-e5-small (384-d); 300 anchors drawn from the 900 training articles;
- image: Fashion-MNIST (2,000 train / 1,000 test, the cross-architecture-vision reproduction's set),
  EfficientNet-lite0 and lite1 (1280-d); 768 anchors drawn from the training images.

For each pair, direction (source -> target) and anchor seed: every route of ``Bridge(routes="auto")`` is fitted on
the anchors; a ``LinearHead`` (logistic regression) is trained on the target's training set as that route's consumer
reads it (``transform_target``), then scores the bridged source test vectors. "own": the same head on each encoder's
own vectors. The bridge's choice is made on the anchors alone, without labels, and again with the target's absolute
head passed as ``head=`` (prediction agreement). Writes results.json and results.md, prints the tables.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from latentstitch._core.provenance import with_provenance

PAIRS = {
    "text": ("minilm-l6", "e5-small"),
    "image": ("efficientnet-lite0", "efficientnet-lite1"),
}
ANCHORS = {"text": 300, "image": 768}
NOTES = (
    "Why the label-free rule ranks translation routes by held-out R^2 and not by retrieval: an earlier rule (the "
    "highest held-out MRR over all routes) picked procrustes_scaled on the image pair, seed 0 (test accuracy 0.685 "
    "and 0.674, against 0.828 and 0.831 for ridge): an orthogonal map of the raw vectors identifies each anchor's "
    "partner best (MRR 0.986 vs 0.899 for ridge) but keeps the source's per-feature scales, which the target's head "
    "reads (held-out R^2 0.40 vs 0.58). Plain cosine relative vectors fail with a linear head on the text pair "
    "(0.54 and 0.23): the two encoders' cosine similarities sit at different offsets; centring on the anchors "
    "removes it, and the label-free scores see the failure (held-out MRR 0.78 and 0.09).",
)


def text_data():
    from latentstitch.experiments.tasks import bbc_task, embed

    task = bbc_task(1200, 500)
    n_train = len(task.y_train)
    encoders: dict = {}
    out = {}
    for name in PAIRS["text"]:
        x = embed(name, task.texts, progress=False, encoders=encoders)
        out[name] = (x[:n_train], x[n_train:])
    return out, task.y_train, task.y_test


def image_data():
    from latentstitch.experiments.cross_architecture_vision import FULL, embeddings

    task, features = embeddings(FULL, progress=False)
    out = {name: (features[name][0].numpy(), features[name][1].numpy()) for name in PAIRS["image"]}
    return out, task.y_train.numpy(), task.y_test.numpy()


def measure_direction(data, y_train, y_test, source, target, anchors, routes):
    from latentstitch.bridge import Bridge, LinearHead, get_route

    (s_train, s_test), (t_train, _) = data[source], data[target]
    target_head = LinearHead().fit(t_train, y_train)  # every translation route's consumer: the target's own head
    accuracy = {}
    for name in routes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            route = get_route(name).build().fit(s_train[anchors], t_train[anchors])
        relative = get_route(name).family == "relative"
        head = LinearHead().fit(route.transform_target(t_train), y_train) if relative else target_head
        accuracy[name] = head.score(route.transform(s_test), y_test)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        label_free = Bridge().fit(s_train[anchors], t_train[anchors])
        seconds = time.perf_counter() - started
        with_head = Bridge().fit(s_train[anchors], t_train[anchors], head=target_head.predict)
    return {
        "accuracy": accuracy,
        "picked": label_free.route_,
        "picked_with_head": with_head.route_,
        "reliable": label_free.reliable_,
        "fit_seconds": seconds,
        "cv_mrr": {row["route"]: row["mrr"][0] for row in label_free.routes_},
        "cv_agreement": {row["route"]: row["agreement"][0] for row in with_head.routes_},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="anchor draws (default 0 1 2)")
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=list(PAIRS))
    parser.add_argument("--out", type=Path, default=Path("latentstitch-results/bridge"))  # results/bridge: when named
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--summarise", type=Path, default=None, metavar="JSON", help="only rewrite the tables of a run")
    args = parser.parse_args()
    if args.summarise is not None:
        print(summarise(json.loads(args.summarise.read_text())))
        return 0

    from latentstitch._core.device import set_threads
    from latentstitch.bridge import LinearHead, resolve_routes

    set_threads(args.threads)
    routes = [spec.name for spec in resolve_routes("auto")]
    results: dict = {"routes": routes, "pairs": {}}
    for pair in args.pairs:
        data, y_train, y_test = text_data() if pair == "text" else image_data()
        own = {
            name: LinearHead().fit(x_train, y_train).score(x_test, y_test) for name, (x_train, x_test) in data.items()
        }
        runs = []
        for source, target in (PAIRS[pair], PAIRS[pair][::-1]):
            for seed in args.seeds:
                anchors = np.random.default_rng(seed).choice(len(y_train), ANCHORS[pair], replace=False)
                run = measure_direction(data, y_train, y_test, source, target, anchors, routes)
                run.update({"source": source, "target": target, "seed": seed})
                runs.append(run)
                best = max(run["accuracy"].values())
                print(
                    f"{pair} {source} -> {target} seed {seed}: picked {run['picked']} "
                    f"({run['accuracy'][run['picked']]:.4f}; best {best:.4f}), with head {run['picked_with_head']}, "
                    f"fit {run['fit_seconds']:.1f} s",
                    flush=True,
                )
        results["pairs"][pair] = {"own": own, "anchors": ANCHORS[pair], "runs": runs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    markdown = summarise(results)
    markdown = with_provenance(markdown, shlex.join(["python", "scripts/measure_bridge.py", *sys.argv[1:]]))
    (args.out / "results.md").write_text(markdown)
    print(markdown)
    return 0


def summarise(results: dict) -> str:
    routes = results["routes"]
    lines = [
        "# Bridge on real encoder pairs",
        "",
        "Command: `PYTHONPATH=src nice -n 10 .venv/bin/python scripts/measure_bridge.py --seeds 0 1 2 --out "
        "results/bridge` (one thread). Text: BBC News, 1,200 articles cut to 500 characters (900 train / 300 test), "
        "MiniLM-L6 and multilingual-e5-small, 300 anchors drawn from the training articles. Image: Fashion-MNIST "
        "2,000 train / 1,000 test through EfficientNet-lite0 and lite1, 768 anchors drawn from the training images. "
        "Every route is fitted on the anchors only; its consumer is a LinearHead (logistic regression on "
        "standard-scaled inputs) trained on the target's training set as the route reads it (the target's vectors "
        "for translation routes, its relative vectors for relative routes) and scored on the source's test vectors. "
        "'Own': the same head on each encoder's own vectors. 'Picked (no labels)': `Bridge()` on the anchors; 'picked "
        "with head': `Bridge().fit(..., head=target_head.predict)`.",
        "",
    ]
    counts = {"exact": 0, "near": 0, "exact_head": 0, "near_head": 0, "runs": 0}
    for pair, entry in results["pairs"].items():
        own = entry["own"]
        weaker = min(own.values())
        seeds = sorted({run["seed"] for run in entry["runs"]})
        lines += [
            f"## {pair}: own accuracy {', '.join(f'{k} {v:.4f}' for k, v in own.items())}; {entry['anchors']} "
            f"anchors, seeds {seeds}",
            "",
            "Zero-shot test accuracy of a LinearHead trained on the target, per route (mean ± std over anchor seeds):",
            "",
            "| source -> target | " + " | ".join(routes) + " |",
            "|---" * (len(routes) + 1) + "|",
        ]
        directions: dict = {}
        for run in entry["runs"]:
            directions.setdefault((run["source"], run["target"]), []).append(run)
        for (source, target), runs in directions.items():
            values = {route: [r["accuracy"][route] for r in runs] for route in routes}
            cells = [f"{np.mean(values[route]):.4f} ± {np.std(values[route]):.4f}" for route in routes]
            lines.append(f"| {source} -> {target} | " + " | ".join(cells) + " |")
        lines += [
            "",
            "| source -> target | seed | picked (no labels) | its accuracy | / weaker own | best route | best accuracy "
            "| picked with head | its accuracy | / weaker own |",
            "|---" * 10 + "|",
        ]
        for run in entry["runs"]:
            accuracy = run["accuracy"]
            best_route = max(accuracy, key=accuracy.get)
            best = accuracy[best_route]
            picked, picked_head = accuracy[run["picked"]], accuracy[run["picked_with_head"]]
            counts["runs"] += 1
            counts["exact"] += picked == best
            counts["near"] += best - picked <= 0.01
            counts["exact_head"] += picked_head == best
            counts["near_head"] += best - picked_head <= 0.01
            lines.append(
                f"| {run['source']} -> {run['target']} | {run['seed']} | {run['picked']} | {picked:.4f} | "
                f"{picked / weaker:.3f} | {best_route} | {best:.4f} | {run['picked_with_head']} | {picked_head:.4f} | "
                f"{picked_head / weaker:.3f} |"
            )
        ratios = [r["accuracy"][r["picked"]] / weaker for r in entry["runs"]]
        lines += [
            "",
            f"Picked route / weaker encoder's own accuracy: min {min(ratios):.3f}, mean {np.mean(ratios):.3f}.",
            "",
        ]
    total = counts["runs"]
    lines += [
        *NOTES,
        "",
        f"Label-free choice: the route with the highest test accuracy in {counts['exact']} of {total} runs, within "
        f"1 point of it in {counts['near']} of {total}. With the head's prediction agreement: {counts['exact_head']} "
        f"and {counts['near_head']} of {total}.",
        "",
        "Bridge.fit seconds (label-free, all routes, 5 folds, one thread, shared machine): "
        + ", ".join(
            f"{pair} {np.mean([r['fit_seconds'] for r in entry['runs']]):.1f}"
            for pair, entry in results["pairs"].items()
        ),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    torch.set_num_threads(1)
    raise SystemExit(main())
