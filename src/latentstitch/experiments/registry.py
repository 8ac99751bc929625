"""The paper reproductions by name: ``latentstitch reproduce NAME`` runs ``load(NAME).run(...)``.

A small module with no heavy imports (the command line reads it before it imports any experiment). Each
reproduction is a package of ``latentstitch.experiments`` that defines ``HELP`` (one line), ``PAPER`` (the citation)
and ``run(*, quick: bool, out_dir: Path, progress: bool, config=None) -> Report``: the ``_run.Reproduction`` protocol
(with ``resume`` for those in RESUMABLE and ``device`` for those in ON_DEVICE).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # the command line reads this module before anything else: no import at run time
    from latentstitch.experiments._run import Reproduction

#: Where runs go unless told otherwise (``--out``); the repository's committed full runs live in results/.
DEFAULT_ROOT = Path("latentstitch-results")
#: Where ``latentstitch demo`` (``experiments.demo.run_demo``) writes unless told otherwise.
DEMO_OUT = DEFAULT_ROOT / "demo"

#: name (as the command line spells it) -> the module of the reproduction (a package per reproduction).
REPRODUCTIONS: dict[str, str] = {
    "ae-stitching": "latentstitch.experiments.ae_stitching",
    "cross-architecture-text": "latentstitch.experiments.cross_architecture_text",
    "cross-architecture-vision": "latentstitch.experiments.cross_architecture_vision",
    "cross-lingual": "latentstitch.experiments.cross_lingual",
    "frankenstein": "latentstitch.experiments.frankenstein",
    "latent-similarity-proxy": "latentstitch.experiments.latent_similarity_proxy",
    "latent-similarity-proxy-graph": "latentstitch.experiments.latent_similarity_proxy_graph",
    "relative-training": "latentstitch.experiments.relative_training",
    "robust-relative": "latentstitch.experiments.robust_relative",
    "word-embeddings": "latentstitch.experiments.word_embeddings",
}

#: Reproductions whose run(...) also takes ``resume: bool`` (a checkpoint of finished stages in OUT/checkpoint).
RESUMABLE: tuple[str, ...] = ("ae-stitching", "frankenstein")
#: Reproductions whose run(...) also takes ``device`` (``reproduce NAME --device cuda``): the long trainings.
ON_DEVICE: tuple[str, ...] = ("ae-stitching", "frankenstein")


def check_name(name: str) -> str:
    """``name`` if it is a known reproduction; else a ValueError naming the known ones."""
    if name not in REPRODUCTIONS:
        known = ", ".join(sorted(REPRODUCTIONS)) or "none yet"
        raise ValueError(f"name: unknown reproduction {name!r}; available: {known}")
    return name


def help_line(name: str) -> str:
    """The reproduction's one-line ``HELP``, read from its package's source without importing it (``reproduce
    --list`` answers at once: importing a reproduction loads torch and its experiment's code)."""
    spec = importlib.util.find_spec(REPRODUCTIONS[check_name(name)])
    if spec is None or spec.origin is None:
        return ""
    with open(spec.origin, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HELP" for t in node.targets):
            return str(ast.literal_eval(node.value))
    return ""


def load(name: str) -> Reproduction:
    """The module of the reproduction ``name`` (imported now: it may load torch and the experiment's code)."""
    return cast("Reproduction", importlib.import_module(REPRODUCTIONS[check_name(name)]))


@functools.cache
def settings_digest(name: str, quick: bool) -> str | None:
    """A short digest of the reproduction's current settings (its ``config.FULL`` or ``config.QUICK``), stamped into
    each run's results.json, so a report can tell a committed result that predates a change of its settings. None
    for a reproduction without a ``config`` module."""
    try:
        config = importlib.import_module(REPRODUCTIONS[check_name(name)] + ".config")
    except ModuleNotFoundError:
        return None
    settings = getattr(config, "QUICK" if quick else "FULL", None)
    if settings is None:
        return None
    text = json.dumps(asdict(settings), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
