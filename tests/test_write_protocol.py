"""Every file the package writes goes through ``latentstitch._core.atomic``: a scan of the source for raw write
calls (``np.save``, ``save_file``, ``Path.write_text``, ``open(..., "w")``, ``savefig``, ``torch.save``, ...).

A raw write call is accepted only where it writes the temporary file of the atomic protocol:
- inside ``with atomic_path(...) as NAME:``, with NAME among the call's arguments (or its receiver), or
- in one of the functions of ``ALLOWED``, each with its reason (a ``PendingFile``'s temporary path, committed by the
  same object's ``close``; an in-memory buffer).
Any other write fails this test: route it through ``atomic_path`` / ``write_text`` / ``write_bytes``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src" / "latentstitch"

#: Calls that write a file whatever their receiver or module.
ALWAYS = {
    "savez",
    "savez_compressed",
    "savetxt",
    "save_file",
    "save_model",
    "savefig",
    "open_memmap",
    "ParquetWriter",
    "to_parquet",
    "to_csv",
    "to_feather",
    "tofile",
    "dump",
    "write_text",
    "write_bytes",
    "touch",
    "symlink_to",
    "hardlink_to",
}
#: ``module.name`` calls that write or move files (``np.save``, ``os.replace``, ``shutil.copy``, ...).
QUALIFIED = {
    ("np", "save"),
    ("numpy", "save"),
    ("torch", "save"),
    ("os", "replace"),
    ("os", "rename"),
    ("os", "link"),
    ("os", "symlink"),
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copyfile"),
    ("shutil", "copytree"),
    ("shutil", "move"),
    ("pq", "write_table"),
    ("parquet", "write_table"),
}
#: The writers of ``_core/atomic.py`` itself, imported by name: these are the protocol.
PROTOCOL = {"write_text", "write_bytes", "append_text", "write_figure"}
#: The only functions that may call a raw writer outside ``with atomic_path``, and why.
ALLOWED = {
    ("embeddings/_write.py", "EmbeddingWriter._open"): "opens the memory map / parquet / CSV on PendingFile.path",
    ("embeddings/_write.py", "EmbeddingWriter._write_held"): "writes .npz/.safetensors/.pt to PendingFile.path",
    ("report/_charts.py", "_png"): "draws PNG bytes into an in-memory buffer (embedded in the page): no file",
    ("migrate/stores/_files.py", "FileWriter.__init__"): "opens the staged .npy inside apply's partial folder, which "
    "_core.atomic.commit_staged renames onto the output once every chunk is written (resumable: the folder survives "
    "an interruption, the output never holds a partial index)",
    ("migrate/stores/_protocol.py", "VectorStore.snapshot"): "copies an input store into a fresh private temporary "
    "folder that an engine writing on open reads instead of the user's store (removed when the store closes): a "
    "scratch copy, not an output",
}
EXEMPT_MODULES = {"_core/atomic.py"}  # the protocol itself


def _opens_for_writing(call: ast.Call) -> bool:
    """``open(path, "w")``, ``gzip.open(path, "wb")``, ``Path.open("a")``, ``open(..., mode="x")``."""
    modes = [*call.args[:2], *(k.value for k in call.keywords if k.arg == "mode")]
    texts = [m.value for m in modes if isinstance(m, ast.Constant) and isinstance(m.value, str)]
    return any(len(t) <= 3 and set(t) <= set("rwxabt+") and set(t) & set("wax+") for t in texts)


def _is_write(call: ast.Call, protocol_names: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        if func.id == "open":
            return _opens_for_writing(call)
        return func.id in ALWAYS and func.id not in protocol_names
    if isinstance(func, ast.Attribute):
        if func.attr == "open":
            return _opens_for_writing(call)
        if isinstance(func.value, ast.Name) and (func.value.id, func.attr) in QUALIFIED:
            return True
        return func.attr in ALWAYS
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Scanner(ast.NodeVisitor):
    def __init__(self, module: str, protocol_names: set[str]):
        self.module = module
        self.protocol_names = protocol_names
        self.scope: list[str] = []
        self.temporaries: list[set[str]] = []  # the names bound by enclosing `with atomic_path(...) as NAME`
        self.found: list[str] = []

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _function

    def visit_With(self, node: ast.With) -> None:
        bound = set()
        for item in node.items:
            expr = item.context_expr
            callee = expr.func if isinstance(expr, ast.Call) else None
            name = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
            if name == "atomic_path" and isinstance(item.optional_vars, ast.Name):
                bound.add(item.optional_vars.id)
        self.temporaries.append(bound)
        self.generic_visit(node)
        self.temporaries.pop()

    def visit_Call(self, node: ast.Call) -> None:
        if _is_write(node, self.protocol_names):
            where = ".".join(self.scope)
            temporaries = set().union(*self.temporaries) if self.temporaries else set()
            if not (_names(node) & temporaries) and (self.module, where) not in ALLOWED:
                self.found.append(f"{self.module}:{node.lineno} in {where or '<module>'}: {ast.unparse(node)[:90]}")
        self.generic_visit(node)


def raw_writes(module: str, text: str) -> list[str]:
    """The write calls of one module's source that bypass the atomic protocol."""
    tree = ast.parse(text)
    protocol_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "latentstitch._core.atomic":
            protocol_names |= {alias.asname or alias.name for alias in node.names if alias.name in PROTOCOL}
        if isinstance(node, ast.ImportFrom) and node.module == "latentstitch._core.figures":
            protocol_names |= {alias.asname or alias.name for alias in node.names if alias.name in PROTOCOL}
    scanner = _Scanner(module, protocol_names)
    scanner.visit(tree)
    return scanner.found


def test_no_module_writes_a_file_outside_the_atomic_protocol():
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        module = path.relative_to(SOURCE).as_posix()
        if module not in EXEMPT_MODULES:
            found += raw_writes(module, path.read_text(encoding="utf-8"))
    assert not found, "raw file writes outside latentstitch._core.atomic:\n" + "\n".join(found)


def test_the_allow_list_names_functions_that_exist():
    for module, qualified in ALLOWED:
        *owner, function = qualified.split(".")
        body = ast.parse((SOURCE / module).read_text(encoding="utf-8")).body
        for name in owner:
            body = next(n.body for n in body if isinstance(n, ast.ClassDef) and n.name == name)
        assert any(isinstance(n, ast.FunctionDef) and n.name == function for n in body), (module, qualified)


@pytest.mark.parametrize(
    "code",
    [
        "from pathlib import Path\nPath('x').write_text('y')",
        "import numpy as np\nnp.save('x.npy', a)",
        "import torch\ntorch.save(obj, 'x.pt')",
        "def f(p):\n    with open(p, 'w') as h:\n        h.write('x')",
        "def f(p):\n    with p.open(mode='a') as h:\n        h.write('x')",
        "def f(p):\n    with p.open('a') as h:\n        h.write('x')",
        "import gzip\ngzip.open('x.gz', 'wb')",
        "from safetensors.torch import save_file\nsave_file(t, 'x.safetensors')",
        "def plot(figure, path):\n    figure.savefig(path)",
        "import os\nos.replace('a', 'b')",
        "import json\njson.dump(payload, handle)",
        # inside atomic_path, but writing another path than the temporary one
        "def f(t, other):\n    with atomic_path(t) as tmp:\n        save_file({}, other)",
    ],
)
def test_the_scan_catches_raw_writes(code):
    assert raw_writes("somewhere.py", code)


@pytest.mark.parametrize(
    "code",
    [
        "from latentstitch._core.atomic import write_text\nwrite_text('x', 'y')",
        "def f(t):\n    with atomic_path(t) as tmp:\n        save_file({}, str(tmp))",
        "def f(t, figure):\n    with atomic_path(t, option='o') as tmp:\n        figure.savefig(tmp, dpi=9)",
        "def f(p):\n    with open(p) as h:\n        return h.read()",
        "def f(p):\n    with open(p, 'rb') as h:\n        return h.read()",
        "text.replace('a', 'b')",
    ],
)
def test_the_scan_accepts_atomic_writes_and_reads(code):
    assert not raw_writes("somewhere.py", code)
