"""`latentstitch report`: one self-contained HTML page over result files, checked in a real headless browser.

The browser is Debian's chromium (installed by scripts/setup.sh), driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: fd 3 in, fd 4 out, messages separated by NUL bytes), so no extra package is needed. The
page is opened at a laptop's screen size; the test asserts every image decoded, every table is there, every
internal link has a target, nothing outside the file was requested, and nothing is wider than the screen.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from latentstitch.cli import main
from latentstitch.experiments._report import Pattern, Report, ResultTable, at_least, judge
from latentstitch.report import find_results, load_result, render_html

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LAPTOP = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}


def _png(path: Path, seed: int) -> str:
    from latentstitch._core.figures import pyplot, save_figure

    plt = pyplot()
    figure, ax = plt.subplots(figsize=(6, 3))
    ax.plot(np.random.default_rng(seed).normal(size=50).cumsum())
    return save_figure(figure, path)


def _reproduction(folder: Path, name: str, *, quick: bool, holds: bool) -> Report:
    declared = [
        Pattern("a", f"{name}: method A beats B", "0.9 vs 0.1", "A - B", at_least(0.2), headline=True),
        Pattern("b", f"{name}: B stays near chance", "0.10", "B accuracy", at_least(0.0)),
    ]
    report = Report(
        name=name,
        title=f'Reproduction {name} <with markup & quotes">',
        paper="Someone et al. 2023",
        setting={"seeds": [0, 1], "data": "digits"},
        differences=["fewer epochs"],
        tables=[
            ResultTable("scores", ["method", "ours", "paper"], [["A", (0.9, 0.01), 0.95], ["B", 0.12, None]]),
            ResultTable("wide", [f"column {i}" for i in range(30)], [[float(i) for i in range(30)]]),
        ],
        patterns=judge(declared, {"a": (0.8 if holds else 0.1, "detail a"), "b": 0.12}, quick=quick),
        figures={"a curve": _png(folder / "curve.png", 0), "another curve": _png(folder / "other.png", 1)},
        numbers={"x": [1, 2]},
        seconds=12.0,
        quick=quick,
    )
    report.write(folder)
    return report


def _results_folder(root: Path) -> Path:
    """Two reproductions (full, quick), a bridge and a compare output shaped per interface 2, a stray JSON file."""
    _reproduction(root / "alpha", "alpha", quick=False, holds=True)
    _reproduction(root / "beta", "beta", quick=True, holds=False)
    rows = [["ridge", [0.8, 0.01], 0.9], ["procrustes", 0.7, None]]
    table = {"title": "translation quality", "columns": ["route", "R^2", "cosine"], "rows": rows, "note": "held-out"}
    (root / "bridge.json").write_text(
        json.dumps({"kind": "bridge", "title": "Bridge old -> new", "tables": [table], "notes": ["fitted on 300"]})
    )
    (root / "cmp").mkdir()
    (root / "cmp" / "compare.json").write_text(
        json.dumps({"kind": "compare", "title": "Compare two models", "tables": [table], "notes": []})
    )
    (root / "settings.json").write_text(json.dumps({"not": "a result"}))
    return root


def test_finds_every_result_and_nothing_else(tmp_path):
    root = _results_folder(tmp_path)
    found = find_results(root)
    assert sorted(p.relative_to(root).as_posix() for p in found) == [
        "alpha/results.json",
        "beta/results.json",
        "bridge.json",
        "cmp/compare.json",
    ]
    kinds = sorted(load_result(p).kind for p in found)
    assert kinds == ["bridge", "compare", "reproduction", "reproduction"]


def test_page_is_self_contained_and_escapes_text(tmp_path):
    root = _results_folder(tmp_path)
    page = render_html(find_results(root))
    # 4 figures of the reproductions, 1 chart of the bridge's route scores
    assert page.count("data:image/png;base64,") == 5 and 'src="http' not in page and "<script" not in page
    assert "&lt;with markup &amp; quotes&quot;&gt;" in page and "<with markup" not in page
    assert "✓ held" in page and "✗ not held" in page
    assert page.count('<section class="result"') == 4
    assert "0.800 ± 0.010" in page  # a [mean, std] cell of the bridge table


def test_report_command_writes_the_page_and_rejects_bad_folders(tmp_path, capsys):
    root = _results_folder(tmp_path / "results")
    out = tmp_path / "out" / "report.html"
    assert main(["report", str(root), "-o", str(out)]) == 0
    assert "4 result file(s)" in capsys.readouterr().out and out.stat().st_size > 10_000
    assert main(["report", str(tmp_path / "missing"), "-o", str(out)]) == 2
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "-o", str(out)]) == 2
    assert "no result JSON file" in capsys.readouterr().err


class _DevTools:
    """A headless chromium driven over the DevTools protocol on a pipe."""

    def __init__(self, binary: str, profile: Path):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire():  # in the child: the protocol's fixed descriptors 3 (commands in) and 4 (replies out)
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.process = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,
            pass_fds=(3, 4),
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        for index, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(index)
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


_CHECK_PAGE = """JSON.stringify({
  images: Array.from(document.images).map(i => ({complete: i.complete, width: i.naturalWidth,
                                                   height: i.naturalHeight, shown: i.getBoundingClientRect().width})),
  tables: document.querySelectorAll("table").length,
  sections: Array.from(document.querySelectorAll("section.result")).map(s => s.id),
  verdictRows: document.querySelectorAll("table.patterns tbody tr").length,
  brokenLinks: Array.from(document.querySelectorAll('a[href^="#"]'))
      .map(a => a.getAttribute("href").slice(1)).filter(id => !document.getElementById(id)),
  tocLinks: Array.from(document.querySelectorAll("nav.toc a")).map(a => a.getAttribute("href").slice(1)),
  tocBottom: document.querySelector("nav.toc").getBoundingClientRect().bottom,
  mainTop: document.querySelector("main").getBoundingClientRect().top,
  mainLeft: document.querySelector("main").getBoundingClientRect().left,
  pageWidth: document.documentElement.scrollWidth,
  viewWidth: window.innerWidth,
})"""


@pytest.mark.integration
def test_report_renders_in_a_headless_browser(tmp_path):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it)")
    root = _results_folder(tmp_path / "results")
    page = tmp_path / "report.html"
    assert main(["report", str(root), "-o", str(page)]) == 0
    with tempfile.TemporaryDirectory() as profile:
        browser = _DevTools(binary, Path(profile))
        try:
            target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Network", "Runtime"):
                browser.call(f"{domain}.enable", session=session)
            states = {}
            for name, size in (("laptop", LAPTOP), ("phone", PHONE)):
                browser.call(
                    "Emulation.setDeviceMetricsOverride",
                    {**size, "deviceScaleFactor": 1, "mobile": name == "phone"},
                    session=session,
                )
                browser.call("Page.navigate", {"url": page.as_uri()}, session=session)
                browser.wait_for("Page.loadEventFired")
                checked = browser.call(
                    "Runtime.evaluate", {"expression": _CHECK_PAGE, "returnByValue": True}, session=session
                )
                states[name] = json.loads(checked["result"]["value"])
                if name == "laptop":
                    shot = browser.call("Page.captureScreenshot", {"format": "png"}, session=session)
            sent = [e for e in browser.events if e.get("method") == "Network.requestWillBeSent"]
            requests = [e["params"]["request"]["url"] for e in sent]
        finally:
            browser.close()
    state, phone = states["laptop"], states["phone"]
    screenshot = base64.b64decode(shot["data"])
    (tmp_path / "report.png").write_bytes(screenshot)
    if os.environ.get("LATENTSTITCH_KEEP_SCREENSHOT"):  # to look at it: the path to copy the PNG to
        Path(os.environ["LATENTSTITCH_KEEP_SCREENSHOT"]).write_bytes(screenshot)
    assert screenshot.startswith(b"\x89PNG") and len(screenshot) > 20_000
    assert len(state["images"]) == 5  # 4 figures, the bridge's route chart
    assert all(i["complete"] and i["width"] > 100 and i["height"] > 50 and i["shown"] > 100 for i in state["images"])
    # 2 reproductions x (patterns + 2 tables) + bridge + compare + the overview + what is not shown (settings.json)
    assert state["tables"] == 2 * 3 + 1 + 1 + 1 + 1
    assert state["sections"] == ["alpha", "beta", "bridge", "compare"]
    assert state["verdictRows"] == 2 + 1  # full run: both patterns; quick run: the headline one
    assert state["brokenLinks"] == []
    assert set(state["sections"]) <= set(state["tocLinks"]), "a section is missing from the table of contents"
    assert state["pageWidth"] <= state["viewWidth"], "the page scrolls sideways on a laptop screen"
    assert state["mainLeft"] >= 200, "the table of contents is not beside the page on a laptop screen"
    assert phone["pageWidth"] <= phone["viewWidth"], "the page scrolls sideways on a phone"
    assert phone["tocBottom"] <= phone["mainTop"] + 1 and phone["mainLeft"] < 40, "contents not on top on a phone"
    assert requests and all(url.startswith(("file:", "data:")) for url in requests), requests
