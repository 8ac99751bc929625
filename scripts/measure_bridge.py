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
import time
import warnings
from pathlib import Path

import numpy as np
import torch

PAIRS = {
    "text": ("minilm-l6", "e5-small"),
    "image": ("efficientnet-lite0", "efficientnet-lite1"),
}
ANCHORS = {"text": 300, "image": 768}


def text_data():
    from latentstitch.experiments._text import bbc_task, embed

    task = bbc_task(1200, 500)
    n_train = len(task.y_train)
    encoders: dict = {}
    out = {}
    for name in PAIRS["text"]:
        x = embed(name, task.texts, progress=False, encoders=encoders)
        out[name] = (x[:n_train], x[n_train:])
    return out, task.y_train, task.y_test


def image_data():
    from latentstitch.experiments.cross_architecture_vision import embeddings, settings

    task, features = embeddings(settings(False), progress=False)
    out = {name: (features[name][0].numpy(), features[name][1].numpy()) for name in PAIRS["image"]}
    return out, task.y_train.numpy(), task.y_test.numpy()


def measure_direction(data, y_train, y_test, source, target, anchors, routes):
    from latentstitch.bridge import Bridge, LinearHead, get_route

    (s_train, s_test), (t_train, _t_test) = data[source], data[target]
    accuracy = {}
    for name in routes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            route = get_route(name).build().fit(s_train[anchors], t_train[anchors])
        relative = get_route(name).family == "relative"
        head = LinearHead().fit(route.transform_target(t_train) if relative else t_train, y_train)
        accuracy[name] = head.score(route.transform(s_test), y_test)
    target_head = LinearHead().fit(t_train, y_train)
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
    parser.add_argument("--out", type=Path, default=Path("results/bridge"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from latentstitch._backend import set_threads
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
    (args.out / "results.md").write_text(markdown)
    print(markdown)
    return 0


def summarise(results: dict) -> str:
    routes = results["routes"]
    lines = ["# Bridge on real encoder pairs", ""]
    picked_best = picked_best_head = total = 0
    for pair, entry in results["pairs"].items():
        own = entry["own"]
        lines += [
            f"## {pair}: {', '.join(f'{k} own accuracy {v:.4f}' for k, v in own.items())}; {entry['anchors']} anchors",
            "",
            "| direction | "
            + " | ".join(routes)
            + " | picked (no labels) | its accuracy / weaker own | picked with head "
            "| its accuracy / weaker own |",
            "|---" * (len(routes) + 5) + "|",
        ]
        weaker = min(own.values())
        directions: dict = {}
        for run in entry["runs"]:
            directions.setdefault((run["source"], run["target"]), []).append(run)
            total += 1
            best = max(run["accuracy"].values())
            picked_best += run["accuracy"][run["picked"]] == best
            picked_best_head += run["accuracy"][run["picked_with_head"]] == best
        for (source, target), runs in directions.items():
            cells = []
            for route in routes:
                values = [r["accuracy"][route] for r in runs]
                cells.append(f"{np.mean(values):.4f} ± {np.std(values):.4f}")
            picked = [r["accuracy"][r["picked"]] / weaker for r in runs]
            picked_head = [r["accuracy"][r["picked_with_head"]] / weaker for r in runs]
            names = ", ".join(sorted({r["picked"] for r in runs}))
            names_head = ", ".join(sorted({r["picked_with_head"] for r in runs}))
            ratio = f"{np.mean(picked):.3f} (min {np.min(picked):.3f})"
            ratio_head = f"{np.mean(picked_head):.3f} (min {np.min(picked_head):.3f})"
            tail = f" | {names} | {ratio} | {names_head} | {ratio_head} |"
            lines.append(f"| {source} -> {target} | " + " | ".join(cells) + tail)
        lines.append("")
    lines += [
        f"Label-free choice picked the route with the highest test accuracy in {picked_best} of {total} runs; with the "
        f"head's prediction agreement, in {picked_best_head} of {total}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    torch.set_num_threads(1)
    raise SystemExit(main())
