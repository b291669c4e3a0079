"""The HTML timeline of every corpus trace: failing invariant shown, one lane per actor, well-formed,
escaped, and actually rendered by a browser (headless Chromium screenshot)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from models.core import Action, Json
from properties.cli import main
from properties.cli.promote import CORPUS, corpus
from properties.cli.report import GLOBAL, changes, lanes, render
from traces.format import Trace, TraceStep, load

TRACES = [p for p in corpus() if load(p).failure]  # counterexamples; a passing regression trace has no failure
IDS = [str(p.relative_to(CORPUS)) for p in TRACES]
PASSING = [p for p in corpus() if not load(p).failure]
SVG_NS = "{http://www.w3.org/2000/svg}"
_VOID = {"meta", "br", "rect", "line"}
FAILURE_RED = (0xC6, 0x28, 0x28)
"""The border colour of the failure box (`.failure` in the page's CSS)."""


class _Balance(HTMLParser):
    """Checks that every element is closed in order (void elements aside)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
        else:
            self.stack.pop()


def _svg(page: str) -> ET.Element:
    match = re.search(r"<svg\b.*?</svg>", page, re.S)
    assert match is not None, "no inline SVG"
    return ET.fromstring(match.group(0))


def _lane_labels(svg: ET.Element) -> list[str]:
    labels = []
    for text in svg.iter(f"{SVG_NS}text"):
        title = text.find(f"{SVG_NS}title")
        if text.get("class") == "lane-label" and title is not None and title.text is not None:
            labels.append(title.text)
    return labels


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_report_shows_failure_and_lanes(path: Path) -> None:
    trace = load(path)
    page = render(trace)
    parser = _Balance()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.stack == []
    box = page.split('<div class="failure">', 1)[1].split("</div>", 1)[0]
    failing = next((s for s in trace.steps if s.violations), None)
    if failing is None:  # a liveness or deadlock trace: the failure is judged on its last state
        kind, names = trace.failure["kind"], trace.failure["names"]
        assert isinstance(names, list) and names
        for name in names:
            assert f"{name} ({kind}) fails from step {len(trace.steps) - 1} on" in box
    else:
        for name in failing.violations:
            assert f"{name} violated at step" in box
    actors = lanes(trace)
    assert len(actors) >= 2 and actors[0] == GLOBAL
    assert _lane_labels(_svg(page)) == actors
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # no network fetches


@pytest.mark.parametrize("path", PASSING, ids=[str(p.relative_to(CORPUS)) for p in PASSING])
def test_a_passing_trace_says_so_instead_of_a_failure_box(path: Path) -> None:
    page = render(load(path))
    assert '<div class="ok">No invariant is violated in this trace.</div>' in page
    assert '<div class="failure">' not in page


@pytest.mark.parametrize(
    ("mechanism", "lane", "variable"),
    [("topiclist", "pools[heap]", "pools"), ("metadata", "threads[N-backend]", "threads"),
     ("pidquota", "entries[A]", "entries"), ("delayed", "deliver_at[1:0]", "deliver_at"),
     ("keyshared", "consumer[1]", "consumers")],
)
def test_actors_are_derived_from_the_state(mechanism: str, lane: str, variable: str) -> None:
    # a scope without the variable the lane comes from (topiclist's semaphore scope) has no such lane
    traces = [t for t in (load(p) for p in TRACES if p.parent.name == mechanism) if variable in t.steps[0].vars]
    assert traces and all(lane in lanes(t) for t in traces)


def test_hostile_text_is_escaped() -> None:
    evil = "<script>alert('x')</script>&\""
    vars_before: dict[str, Json] = {"count": 0, "threads": {evil: {"task": ""}}}
    vars_after: dict[str, Json] = {"count": 1, "threads": {evil: {"task": evil}}}
    trace = Trace(
        mechanism=evil, variant=evil, engine="hand", config={"k": evil},
        steps=(
            TraceStep(Action("init"), vars_before, None, ()),
            TraceStep(Action.of(evil, p=evil), vars_after, None, (evil,)),
        ),
    )
    page = render(trace)
    assert "<script>" not in page
    assert "&lt;script&gt;" in page
    svg = _svg(page)
    assert f"threads[{evil}]" in _lane_labels(svg)
    assert any(t.text == f"1. {evil}" for t in svg.iter(f"{SVG_NS}title"))  # the action, round-tripped


def test_cli_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    assert main(["report", str(TRACES[0]), "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    bad = tmp_path / "bad.json"
    bad.write_text('{"states": []}', encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(bad)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


def _pixels(png: bytes) -> tuple[int, int, int, list[bytes]]:
    """Width, height, bytes per pixel and unfiltered rows of an 8-bit RGB/RGBA PNG (enough for a screenshot)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        header = data if kind == b"IHDR" else header
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prior = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prior[i], prior[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prior = line
    return width, height, bpp, rows


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed but CI is set: install Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium); CI must have it")
    return found


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_report_renders_in_headless_chromium(path: Path, tmp_path: Path) -> None:
    chromium = _chromium()
    page, png = tmp_path / "report.html", tmp_path / "shot.png"
    page.write_text(render(load(path)), encoding="utf-8")
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", "--window-size=1400,900",
         page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    data = png.read_bytes()
    assert len(data) > 10_000
    width, height, bpp, rows = _pixels(data)
    assert (width, height) == (1400, 900)
    colours = {row[i : i + 3] for row in rows[::7] for i in range(0, len(row), bpp * 7)}
    assert len(colours) > 20, "the screenshot is (nearly) a single colour"
    red = bytes(FAILURE_RED)
    assert any(row[i : i + 3] == red for row in rows for i in range(0, len(row), bpp)), "failure box not drawn"


def test_check_writes_a_report_beside_each_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["check", "--mechanism", "pidquota", "--variant", "no_readd", "--batches", "1", "--profile", "ci",
            "--out", str(tmp_path)]
    assert main(argv) == 0  # the known-bad twin is caught
    traces = sorted(tmp_path.glob("pidquota/*.json"))
    assert traces
    err = capsys.readouterr().err
    for trace in traces:
        assert f"report: {trace.with_suffix('.html')}" in err
        assert "PQ-I1 violated at step" in trace.with_suffix(".html").read_text(encoding="utf-8")


def test_a_lock_level_trace_has_a_lane_per_thread_with_the_locks_it_holds() -> None:
    """The lost wake-up: each thread's lane shows where it is and which locks it holds at each step."""
    trace = load(CORPUS / "keyshared" / "pip379-locks-lost-wake-up-LK-6.json")
    assert lanes(trace)[1:3] == ["thread[dispatcher]", "thread[acker]"]
    assert not any(lane in ("threads", "locks") or lane.startswith(("threads[", "locks[")) for lane in lanes(trace))
    held = {(c.lane, str(c.after)) for step in changes(trace) for c in step if c.path == "holds"}
    assert ("thread[acker]", "['map[1]']") in held  # inside PendingAcksMap.remove
    assert ("thread[acker]", "['map[1]', 'tracker']") in held  # reduceRefCount's removal, inside both locks
    page = render(trace)
    assert "thread[acker]" in page and "reduceRefCount: entry.blockedCount.get" in page
