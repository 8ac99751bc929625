"""The layout is the architecture: every package sits in a layer, and imports only go down.

The rules (README, "Layout"): no package imports one of a higher layer (not even deferred inside a function); no
module takes part in an import circle, in the package or anywhere in the tree (``benchmarks/``, ``scripts/``); no
underscore-prefixed name and no underscore module crosses a package boundary; ``benchmarks/`` and ``scripts/`` use the
library as a user does, through public modules and names only; nothing inside the package imports the package root
(a facade for users); ``_core`` depends on nothing above it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "latentstitch"
#: Code beside the package, each folder importable from the repository root (``python -m benchmarks``).
BESIDE = ("benchmarks", "scripts")

#: room -> layer; an import may go to the same or a lower layer only.
LAYERS: dict[str, int] = {
    "_version": 0,
    "_core": 0,
    "invariance": 1,
    "distributed": 1,
    "relative": 2,
    "similarity": 3,
    "losses": 3,
    "training": 4,
    "stitching": 5,
    "models": 5,
    "alignment": 6,
    "data": 7,
    "encoders": 7,
    "embeddings": 7,
    "bridge": 8,
    "experiments": 9,
    "migrate": 9,
    "report": 10,
    "cli": 11,
    "__main__": 11,
}


def _modules(folder: Path) -> dict[str, Path]:
    modules = {}
    for path in folder.rglob("*.py"):
        parts = path.relative_to(folder.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


MODULES = _modules(PACKAGE)
#: Every module of the tree: the package, benchmarks/ and scripts/.
TREE = {**MODULES, **{name: path for folder in BESIDE for name, path in _modules(ROOT / folder).items()}}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def _imports(module: str, path: Path, tops: tuple[str, ...] = ("latentstitch",)) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import of ``tops`` (the package: latentstitch),
    deferred ones included."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                known = submodule in TREE
                found.append((submodule, None, node.lineno) if known else (base, alias.name, node.lineno))
    return [item for item in found if item[0].split(".")[0] in tops]


IMPORTS = {module: _imports(module, path) for module, path in MODULES.items()}
TREE_IMPORTS = {module: _imports(module, path, ("latentstitch", *BESIDE)) for module, path in TREE.items()}


def _private_parts(module: str) -> list[str]:
    """The underscore-prefixed parts of a module path below its room (``_core`` is a room: layer 0's toolkit, whose
    modules are public-named and which every package imports)."""
    return [part for part in module.split(".")[2:] if part.startswith("_") and not part.startswith("__")]


def test_every_room_has_a_layer():
    rooms = {_room(module) for module in MODULES} - {"<root>"}
    assert rooms <= set(LAYERS), f"packages without a layer in LAYERS: {sorted(rooms - set(LAYERS))}"


#: Rooms of one layer that are independent features: neither imports the other.
SIBLINGS = [("experiments", "migrate")]


@pytest.mark.parametrize(("first", "second"), SIBLINGS)
def test_siblings_do_not_import_each_other(first, second):
    crossing = [
        f"{module}:{line} imports {target}"
        for module, imports in IMPORTS.items()
        for target, _, line in imports
        if {_room(module), _room(target)} == {first, second}
    ]
    assert not crossing, "\n".join(crossing)


def test_imports_only_go_down():
    upward = []
    for module, imports in IMPORTS.items():
        room = _room(module)
        if room == "<root>":
            continue
        for target, _, line in imports:
            other = _room(target)
            if other == "<root>":
                upward.append(f"{module}:{line} imports the package root (use latentstitch._version or a subpackage)")
            elif LAYERS.get(other, -1) > LAYERS.get(room, -1):
                layers = f"layer {LAYERS.get(room)} imports layer {LAYERS.get(other)}"
                upward.append(f"{module}:{line} imports {target} ({layers})")
    assert not upward, "\n".join(upward)


def _circles(modules: dict[str, Path], imports_of: dict[str, list]) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module) among ``modules``."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, imports in imports_of.items():
        for target, _, _ in imports:
            if target in modules and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    # Tarjan's strongly connected components, iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circles():
    assert not (circles := _circles(MODULES, IMPORTS)), f"import circles: {circles}"


def test_no_import_circles_anywhere_in_the_tree():
    """benchmarks/ and scripts/ too: a helper two modules share lives below both, not in one of them."""
    assert not (circles := _circles(TREE, TREE_IMPORTS)), f"import circles: {circles}"


def test_no_private_name_crosses_a_package():
    crossing = [
        f"{module}:{line} imports {name} from {target}"
        for module, imports in IMPORTS.items()
        for target, name, line in imports
        if name and name.startswith("_") and not name.startswith("__") and _room(target) != _room(module)
    ]
    assert not crossing, "\n".join(crossing)


def test_no_module_imports_another_packages_underscore_module():
    """A package's underscore modules are its own: another package imports the names its ``__init__`` (or a public
    module of it) exports, e.g. ``latentstitch.distributed``, not ``latentstitch.distributed._arrays``."""
    crossing = sorted(
        {
            f"{module}:{line} imports {target}"
            for module, imports in IMPORTS.items()
            for target, _, line in imports
            if _room(target) != _room(module) and _private_parts(target)
        }
    )
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize("folder", BESIDE)
def test_code_beside_the_package_uses_only_its_public_api(folder):
    """benchmarks/ and scripts/ import public modules and public names only, as a user would: what they need from a
    package's internals is exported by the package (or by a documented public module of it)."""
    private = [
        f"{module}:{line} imports {target if name is None else f'{name} from {target}'}"
        for module, imports in TREE_IMPORTS.items()
        if module.split(".")[0] == folder
        for target, name, line in imports
        if target.split(".")[0] == "latentstitch"
        and (_private_parts(target) or (name is not None and name.startswith("_") and not name.startswith("__")))
    ]
    assert not private, "\n".join(private)


@pytest.mark.parametrize("room", ["_core", "_version"])
def test_the_core_depends_on_nothing_above_it(room):
    above = [
        f"{module}:{line} imports {target}"
        for module, imports in IMPORTS.items()
        if _room(module) == room
        for target, _, line in imports
        if LAYERS.get(_room(target), 99) > 0
    ]
    assert not above, "\n".join(above)


@pytest.mark.parametrize(
    "package", sorted(name for name in MODULES if name.count(".") == 1 and not _room(name).startswith("_"))
)
def test_every_name_in_all_exists(package):
    """``from latentstitch.X import *`` works: each package's ``__all__`` names only what the package defines."""
    import importlib

    module = importlib.import_module(package)
    missing = [name for name in getattr(module, "__all__", []) if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not define: {missing}"
