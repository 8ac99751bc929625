"""Real `python -m latentstitch` processes at a fork's cost: one server interpreter imports torch, the library and the
store engines once, then forks a child per command that runs the ``latentstitch`` module as ``-m`` runs it (its
own process id, its own files and locks, exit code, stdout and stderr; killed by a real SIGKILL). A child can be
told to pause at a named step (the n-th rename onto a file name, the n-th open of one) before that step runs: the
test then knows exactly where a run stands when it races or kills it, without sleeping and hoping.

Run as a script, this file is the server: one JSON request a line on stdin, one JSON answer a line on stdout."""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

SERVER = Path(__file__).resolve()
#: What every child would import: loaded once by the server.
PRELOAD = ["torch", "latentstitch.cli", "latentstitch.cli.migrate", "latentstitch.cli._migrate_steps"]


def _pause_hook(pause: dict, marker: str, gate: str):
    """An audit hook that stops the process before the ``count``-th ``event`` (on a path ending in ``name``, when
    given; for ``os.rename``, the path renamed onto): it
    creates ``marker`` and waits until the test writes to the FIFO ``gate`` (or kills the process)."""
    seen = [0]
    busy = [False]

    def hook(event: str, args: tuple) -> None:
        if event != pause["event"] or busy[0]:
            return
        if pause.get("name") is not None:  # a step on a file: on the file whose name ends so
            target = args[1] if event == "os.rename" else args[0]
            if not isinstance(target, (str, bytes, os.PathLike)) or not os.fsdecode(target).endswith(pause["name"]):
                return
        seen[0] += 1
        if seen[0] != pause["count"]:
            return
        busy[0] = True
        Path(marker).write_text(str(os.getpid()))
        with open(gate, "rb") as waiting:
            waiting.read()
        busy[0] = False

    return hook


def _serve() -> dict | None:
    """Answer requests until stdin ends; in a forked child, return its request."""
    # the server only imports LanceDB: no operation of its runtime is under way when it forks
    warnings.filterwarnings("ignore", "lancedb fork support", RuntimeWarning)
    for name in [*PRELOAD, *sys.argv[1:]]:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.freeze()  # the children do not copy the server's objects on their first collection
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "start":
            pid = os.fork()
            if pid == 0:
                return request
            answer = {"pid": pid}
        else:  # "wait" (blocking) or "poll"
            flags = 0 if request["op"] == "wait" else os.WNOHANG
            done, status = os.waitpid(request["pid"], flags)
            answer = {"rc": os.waitstatus_to_exitcode(status) if done else None}
        print(json.dumps(answer), flush=True)
    return None


def _child(request: dict) -> None:
    """Become ``python -m latentstitch ARGS``, with stdout and stderr in files."""
    for fd, name in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    sys.stdin = open(os.devnull)
    os.chdir(request["cwd"])
    if request.get("pause"):
        sys.addaudithook(_pause_hook(request["pause"], request["marker"], request["gate"]))
    import runpy

    sys.argv = ["latentstitch", *request["argv"]]
    try:
        runpy.run_module("latentstitch", run_name="__main__", alter_sys=True)  # ends in sys.exit(main())
        code = 0
    except SystemExit as end:
        code = end.code if isinstance(end.code, int) else 0 if end.code is None else 1
        if not isinstance(end.code, (int, type(None))):
            print(end.code, file=sys.stderr)
    # as the interpreter exits (its exit functions: temporary folders and snapshots removed, files flushed), less
    # the teardown of every module the server imported (minutes of copied pages on a loaded machine)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@dataclass
class Run:
    pid: int
    stdout: Path
    stderr: Path
    marker: Path
    gate: Path
    rc: int | None = None

    def output(self) -> tuple[str, str]:
        return self.stdout.read_text(), self.stderr.read_text()


class ForkedCli:
    """The client: ``start`` a command (optionally paused at a step), ``wait_paused``, ``release``, ``kill``,
    ``wait``."""

    def __init__(self, env: dict[str, str], preload: list[str]):
        self.server = subprocess.Popen(
            [sys.executable, str(SERVER), *preload],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()
        self.runs = 0
        self.started: list[Run] = []
        self.ready = False  # the server imports while the caller goes on; the first request waits for it

    def _ask_line(self) -> dict:
        line = self.server.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (exit {self.server.wait()})")
        return json.loads(line)

    def _ask(self, **request) -> dict:
        with self.lock:
            if not self.ready:
                self.ready = bool(self._ask_line())
            self.server.stdin.write(json.dumps(request) + "\n")
            self.server.stdin.flush()
            return self._ask_line()

    def start(self, argv: list[str], folder: Path, pause: dict | None = None) -> Run:
        self.runs += 1
        base = folder / f"run-{self.runs}"
        run = Run(0, base.with_suffix(".out"), base.with_suffix(".err"), base.with_suffix(".paused"), base)
        if pause:
            os.mkfifo(run.gate)
        request = {"op": "start", "argv": argv, "cwd": str(folder), "stdout": str(run.stdout)}
        request |= {"stderr": str(run.stderr), "pause": pause, "marker": str(run.marker), "gate": str(run.gate)}
        run.pid = self._ask(**request)["pid"]
        self.started.append(run)
        return run

    def wait_paused(self, run: Run, timeout: float = 120) -> None:
        """Wait until ``run`` stands at its pause (or fail, naming how it ended instead)."""
        deadline = time.monotonic() + timeout
        while not run.marker.exists():
            rc = self._ask(op="poll", pid=run.pid)["rc"]
            if rc is not None:
                run.rc = rc
                raise AssertionError(f"the run ended (exit {rc}) before its pause: {run.output()}")
            if time.monotonic() > deadline:
                self.kill(run)
                raise AssertionError(f"the run did not reach its pause in {timeout} s: {run.output()}")
            time.sleep(0.01)

    def release(self, run: Run) -> None:
        with open(run.gate, "wb") as gate:
            gate.write(b"go")

    def kill(self, run: Run) -> int:
        os.kill(run.pid, signal.SIGKILL)
        return self.wait(run)

    def wait(self, run: Run, timeout: float = 180) -> int:
        """The run's exit code (a negative signal number when killed); a run past ``timeout`` is killed."""
        if run.rc is None:
            timer = threading.Timer(timeout, lambda: os.kill(run.pid, signal.SIGKILL))
            timer.start()
            try:
                run.rc = self._ask(op="wait", pid=run.pid)["rc"]
            finally:
                timer.cancel()
        return run.rc

    def close(self) -> None:
        """End the server, once every run it started has ended (a run a failed test left paused is killed)."""
        for run in self.started:
            if run.rc is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(run.pid, signal.SIGKILL)
                self.wait(run)
        self.server.stdin.close()
        try:
            self.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait()


if __name__ == "__main__":
    child = _serve()
    if child is not None:
        _child(child)
