"""Every Python block of README.md and docs/*.md runs, and prints what its comments claim.

Each ```python block is one test, named by file and fence line (``test_block[README.md:62]``). It runs in a fresh
namespace, in a temporary working directory, with one torch thread, and must not reach the network (connections and
name look-ups of other hosts than this machine raise an error). Conventions:

- **Continuing a block.** A block runs on its own unless its first line is ``# continues the example above``: then
  the Python block right above it in the same file (which may itself continue one) runs first, in the same
  namespace. Only the block's own claims are checked.
- **Scripts.** A block holding ``if __name__ == "__main__":`` (multiprocessing, a ``dask.distributed`` cluster) is
  written to a file and run as ``__main__`` in a subprocess; it must be self-contained.
- **Options.** An HTML comment on the line right above the fence, ``<!-- docs-test: slow, needs distributed -->``,
  lists comma-separated options: ``slow`` or ``integration`` (the pytest markers of that name) and ``needs MODULE``
  (skipped, with the reason, when MODULE is not installed).
- **Claims.** The comment at the end of a ``print(...)`` statement is a claim about what that statement prints when
  it starts with one of the forms below; whatever follows the claim after ``": "``, ``"; "``, ``", "`` or ``" ("`` is
  prose. Other comments are prose, and comments on other lines are never read. A comment that starts like a claim (a
  number, ``~``, ``<``, ``>``, ``->``, ``(`` and a digit, True/False/None) but does not parse is an error.

  ==================  ==============================================================================================
  ``0.92``, ``30``    every number printed rounds to it at its precision (within half a unit of its last digit)
  ``~1e-6``           every number printed is within a factor of 10 of it (same order of magnitude)
  ``0.9-1.0``         every number printed is inside the interval, ends included
  ``< 1e-5``          every number printed is below (``<``, ``<=``, ``>``, ``>=``)
  ``(128, 10)``       the integers printed are these (a shape: it matches ``torch.Size([128, 10])`` too)
  ``True``, ``None``  the printed text is exactly this (also ``False``)
  ``-> TEXT``         the printed text is exactly TEXT (which ends at the first ``": "`` or ``"; "``)
  ==================  ==============================================================================================

  The statement must print at least once; one that prints several times (in a loop) must match every time.
"""

from __future__ import annotations

import ast
import inspect
import io
import os
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

import latentstitch

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CONTINUES = "# continues the example above"
MAIN_GUARD = re.compile(r"""^if __name__ == ["']__main__["']:""", re.MULTILINE)
OPTIONS = re.compile(r"^\s*<!--\s*docs-test:(.*?)-->\s*$")
MARKERS = ("slow", "integration")
SCRIPT_TIMEOUT = 300


# --- the blocks ----------------------------------------------------------------------------------------------------
@dataclass
class Block:
    file: str  # relative to the repository root
    fence: int  # line of the opening ```python
    code: str
    options: tuple[str, ...]
    previous: Block | None  # the Python block right above, in the same file

    @property
    def id(self) -> str:
        return f"{self.file}:{self.fence}"

    @property
    def continues(self) -> bool:
        return self.code.lstrip().startswith(CONTINUES)

    @property
    def script(self) -> bool:
        return MAIN_GUARD.search(self.code) is not None

    def chain(self) -> list[Block]:
        """The blocks to run, first to last: this one after those it continues."""
        if not self.continues:
            return [self]
        if self.previous is None:
            raise ValueError(f"{self.id}: '{CONTINUES}' but there is no Python block above it in {self.file}")
        return [*self.previous.chain(), self]

    def source(self) -> str:
        """The code, preceded by blank lines so that its line numbers are the markdown file's."""
        return "\n" * self.fence + self.code


def read_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    opened = None  # (line index, indent, language) of the open fence
    for i, line in enumerate(lines):
        fence = re.match(r"^(\s*)```\s*([\w+-]*)", line)
        if opened is None and fence:
            opened = (i, fence.group(1), fence.group(2).lower())
        elif opened is not None and line.strip() == "```":
            start, indent, language = opened
            opened = None
            if language not in ("python", "py", "python3"):
                continue
            body = [text[len(indent) :] if text.startswith(indent) else text for text in lines[start + 1 : i]]
            above = OPTIONS.match(lines[start - 1]) if start > 0 else None
            options = tuple(item.strip() for item in above.group(1).split(",") if item.strip()) if above else ()
            previous = blocks[-1] if blocks else None
            blocks.append(Block(str(path.relative_to(ROOT)), start + 1, "\n".join(body) + "\n", options, previous))
    return blocks


def as_param(block: Block):
    marks = []
    for option in block.options:
        if option in MARKERS:
            marks.append(getattr(pytest.mark, option))
        elif not re.fullmatch(r"needs [\w.]+", option):
            raise ValueError(f"{block.id}: unknown docs-test option {option!r} (slow, integration, needs MODULE)")
    return pytest.param(block, id=block.id, marks=marks)


BLOCKS = [block for path in FILES for block in read_blocks(path)]


# --- running them --------------------------------------------------------------------------------------------------
def is_local(host) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    return host in (None, "", "localhost", "::1", "0.0.0.0") or str(host).startswith("127.")


def refuse_network(patch) -> None:
    """Refuse name look-ups of, and TCP connections to, hosts other than this machine; ``patch(obj, name, value)``
    installs the guarded functions (``monkeypatch.setattr`` here, ``setattr`` in a script)."""
    import socket

    lookup, connect, connect_ex = socket.getaddrinfo, socket.socket.connect, socket.socket.connect_ex

    def check(host):
        if not is_local(host):
            raise OSError(f"docs runner: the example tried to reach {host!r}; examples must not use the network")

    def getaddrinfo(host, *args, **kwargs):
        check(host)
        return lookup(host, *args, **kwargs)

    def guarded(method):
        def call(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6) and self.type == socket.SOCK_STREAM:
                check(address[0])
            return method(self, address)

        return call

    patch(socket, "getaddrinfo", getaddrinfo)
    patch(socket.socket, "connect", guarded(connect))
    patch(socket.socket, "connect_ex", guarded(connect_ex))


def recorder(filename: str, printed: list):
    """A ``print`` that also appends ``(line, text)`` to ``printed``, line being that of the calling code in
    ``filename``."""
    import builtins
    import sys

    def record(*args, sep=" ", end="\n", file=None, flush=False):
        builtins.print(*args, sep=sep, end=end, file=file, flush=flush)
        if file is None or file is sys.stdout:
            frame = sys._getframe(1)
            while frame is not None and frame.f_code.co_filename != filename:
                frame = frame.f_back
            if frame is not None:
                printed.append((frame.f_lineno, (" " if sep is None else sep).join(map(str, args))))

    return record


SCRIPT_MAIN = """
import json, runpy, sys
script, out = sys.argv[1], sys.argv[2]
printed = []
refuse_network(setattr)
sys.argv = [script]
try:
    runpy.run_path(script, init_globals={"print": recorder(script, printed)}, run_name="__main__")
finally:
    with open(out, "w") as f:
        json.dump(printed, f)
"""


def run_inline(block: Block, monkeypatch) -> list:
    printed: list = []
    filename = str(ROOT / block.file)
    namespace = {"__name__": "docs_example", "print": recorder(filename, printed)}
    refuse_network(monkeypatch.setattr)
    for part in block.chain():
        exec(compile(part.source(), filename, "exec"), namespace)
    return printed


def run_script(block: Block, folder: Path) -> list:
    import json

    if block.continues:
        raise ValueError(f"{block.id}: a script block (with a __main__ guard) must be self-contained")
    script, out = folder / "example.py", folder / "printed.json"
    script.write_text(block.source(), encoding="utf-8")
    runner = "".join(inspect.getsource(f) for f in (is_local, refuse_network, recorder)) + SCRIPT_MAIN
    package = str(Path(latentstitch.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", runner, str(script), str(out)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id}: the script did not finish within {SCRIPT_TIMEOUT} s")
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        pytest.fail(
            f"{block.id}: the script exited with {done.returncode} (line numbers are {block.file}'s):\n"
            + done.stderr[-4000:]
        )
    return [tuple(pair) for pair in json.loads(out.read_text())]


# --- claims --------------------------------------------------------------------------------------------------------
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
PRINTED_NUMBER = re.compile(rf"(?<![\w.]){NUMBER}(?![\w.])")
CLAIM_START = re.compile(rf"(?:~|<|>|->|\(\s*\d|{NUMBER}|(?:True|False|None)\b)")
END = r"(?=$|[:;,]\s|\s\()"
FORMS = [
    ("approx", re.compile(rf"~\s*({NUMBER}){END}")),
    ("bound", re.compile(rf"(<=|>=|<|>)\s*({NUMBER}){END}")),
    ("interval", re.compile(rf"({NUMBER})\s*-\s*({NUMBER}){END}")),
    ("equal", re.compile(rf"({NUMBER}){END}")),
    ("shape", re.compile(rf"\((\s*\d+\s*(?:,\s*\d+\s*)*,?)\){END}")),
    ("text", re.compile(rf"(True|False|None){END}")),
    ("text", re.compile(r"->\s*(.+?)(?=$|[:;]\s)")),
]
RULES = {
    "approx": "within a factor of 10",
    "bound": "a bound on every number printed",
    "interval": "every number printed inside, ends included",
    "equal": "equal at the claim's precision",
    "shape": "the integers printed",
    "text": "the printed text exactly",
}


def parse_claim(comment: str):
    """``(kind, claim text, arguments)`` for a claim, None for prose; ValueError for a malformed claim."""
    text = comment.lstrip("#").strip()
    if not CLAIM_START.match(text):
        return None
    for kind, form in FORMS:
        found = form.match(text)
        if found:
            if kind == "approx" and float(found.group(1)) == 0:
                raise ValueError(f"'{text}': ~0 has no order of magnitude; write a bound such as '< 1e-6'")
            return kind, found.group(0).strip(), found.groups()
    raise ValueError(
        f"'{text}' starts like a claim but is none: write V, ~V, A-B, < V, (n, m), True/False/None or -> TEXT, "
        "then ': ' and prose (or start the comment with a word)"
    )


def holds(kind: str, args: tuple, printed: str) -> bool:
    if kind == "text":
        return printed.strip() == args[0].strip()
    numbers = PRINTED_NUMBER.findall(printed)
    if kind == "shape":
        return [int(float(n)) for n in numbers] == [int(n) for n in args[0].split(",") if n.strip()]
    if not numbers:
        return False
    values = [float(n) for n in numbers]
    if kind == "approx":
        return all(0.1 <= v / float(args[0]) <= 10 for v in values)
    if kind == "bound":
        bound = float(args[1])
        test = {"<": bound.__gt__, "<=": bound.__ge__, ">": bound.__lt__, ">=": bound.__le__}[args[0]]
        return all(test(v) for v in values)
    if kind == "interval":
        return all(float(args[0]) <= v <= float(args[1]) for v in values)
    mantissa, _, exponent = args[0].lower().partition("e")
    digits = len(mantissa.partition(".")[2])
    unit = 10.0 ** (int(exponent or 0) - digits)
    return all(abs(v - float(args[0])) <= 0.5 * unit * (1 + 1e-9) for v in values)


def claims(block: Block) -> dict[tuple[int, int], tuple[int, str]]:
    """``{(first line, last line) of a print statement: (line, comment)}`` for the block's claiming prints."""
    source = block.source()
    comments = {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    found = {}
    for node in ast.walk(ast.parse(source)):
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
            line = node.end_lineno
            if line in comments:
                found[(node.lineno, node.end_lineno)] = (line, comments[line])
    return found


def check_claims(block: Block, printed: list) -> None:
    failures = []
    for (first, last), (line, comment) in sorted(claims(block).items()):
        where = f"{block.file}:{line}"
        try:
            claim = parse_claim(comment)
        except ValueError as error:
            failures.append(f"{where}: {error}")
            continue
        if claim is None:
            continue
        kind, text, args = claim
        outputs = [out for at, out in printed if first <= at <= last]
        if not outputs:
            failures.append(f"{where}: claims '{text}' but the line printed nothing (it never ran)")
        failures += [
            f"{where}: claims '{text}' but printed {out!r} (rule: {RULES[kind]})"
            for out in outputs
            if not holds(kind, args, out)
        ]
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


# --- the tests -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block", [as_param(block) for block in BLOCKS])
def test_block(block: Block, tmp_path, monkeypatch, one_thread):
    for option in block.options:
        if option.startswith("needs "):
            module = option.split()[1]
            pytest.importorskip(module, reason=f"{block.id} needs {module} (pip install 'latentstitch[all]')")
    monkeypatch.chdir(tmp_path)
    printed = run_script(block, tmp_path) if block.script else run_inline(block, monkeypatch)
    check_claims(block, printed)


def test_the_documents_have_python_blocks():
    assert {block.file for block in BLOCKS} >= {"README.md", "docs/distributed.md"}


@pytest.mark.parametrize(
    ("comment", "printed", "expected"),
    [
        ("# ~1e-6: the two spaces now agree", "4.172325134277344e-07", True),
        ("# ~1e-6", "2e-05", False),
        ("# 0.92: read zero-shot", "0.9166", True),
        ("# 0.92", "0.926", False),
        ("# 1.0", "1.0000000000000009 0.9999999999997041 1.0", True),
        ("# 0.99-1.0, the most confident first", "[0.99837891 0.99828132 0.99756816]", True),
        ("# < 1e-5", "3.8e-05", False),
        ("# (128, 10)", "torch.Size([128, 10])", True),
        ("# (1000, 300)", "(1000, 4)", False),
        ("# True", "True", True),
        ("# -> ridge translation True: chosen without labels", "ridge translation True", True),
        ("# -> ridge translation True", "procrustes translation True", False),
        ("# ~0.05, not 0", "0.0535", True),
        ("# R^2 of the prediction of b", "0.2", None),
        ("# the best pair (a0 ~ b1)", "x", None),
        ("# numpy in -> float", "x", None),
    ],
)
def test_claim_rules(comment, printed, expected):
    claim = parse_claim(comment)
    assert (claim is None) if expected is None else holds(claim[0], claim[2], printed) is expected


@pytest.mark.parametrize("comment", ["# 95% interval", "# ~0: nothing", "# (1000, 300 rows"])
def test_malformed_claims_are_errors(comment):
    with pytest.raises(ValueError, match="claim|order of magnitude"):
        parse_claim(comment)


def test_blocks_keep_their_line_numbers():
    block = read_blocks(ROOT / "README.md")[0]
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    first = next(i for i, text in enumerate(block.source().splitlines()) if text)
    assert lines[first] == block.code.splitlines()[0]


def test_scripts_report_their_prints_by_line(tmp_path):
    code = 'if __name__ == "__main__":\n    for _ in range(2):\n        print(6 * 7)  # 41: wrong on purpose\n'
    block = Block("README.md", 10, code, (), None)
    printed = run_script(block, tmp_path)
    assert printed == [(13, "42"), (13, "42")]
    with pytest.raises(pytest.fail.Exception, match=r"README.md:13: claims '41' but printed '42'"):
        check_claims(block, printed)


def test_examples_cannot_reach_the_network(monkeypatch):
    import socket

    refuse_network(monkeypatch.setattr)
    with pytest.raises(OSError, match="must not use the network"):
        socket.create_connection(("example.org", 80), timeout=1)
    with socket.socket() as server:  # this machine is allowed
        server.bind(("127.0.0.1", 0))
        server.listen()
        socket.create_connection(server.getsockname(), timeout=1).close()
