"""Draw a trace as a self-contained HTML page: an inline-SVG timeline with one lane per actor.

A person should see a counterexample, not read its JSON. Actors are derived generically from the
state variables, so every mechanism gets lanes without code of its own: each key of a dict-valued
variable (threads, principals, paths) and each element of a list of records or tuples (pools,
connections, holders, buckets) is one lane; scalar variables share the `global` lane. A binding may
refine that with hints (`Mechanism.lanes`): elements named by their first items, or gathered under
the actor one of their items names. Each step
shows its action and parameters, the fields that changed, and the failing invariant is
highlighted with its description, the model's explanation and the values that changed there.
The page needs no network and no JavaScript; every piece of trace text is escaped.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from models.core import ActionNotEnabled, Json
from properties.engines.mechanism import Lanes
from properties.engines.replay import STUCK_KINDS
from properties.registry import mechanism_for, mechanisms, model_for
from traces.format import Trace, TraceError

GLOBAL = "global"
_ID_FIELDS = ("name", "key", "id", "principal", "thread", "path")
"""Record fields that name an element of a list, in preference order (else its index)."""

_LANE_H, _LABEL_W, _STEP_W, _HEAD_H = 26, 230, 170, 54
_CELL_CHARS = 23


@dataclass(frozen=True)
class Change:
    """One changed field of one actor in one step; `None` stands for absent."""

    lane: str
    path: str
    before: Json | None
    after: Json | None


def _compact(value: Json | None, limit: int = 80) -> str:
    if value is None:
        return "∅"
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple)


def _actor_vars(trace: Trace) -> set[str]:
    """Variables that hold actors: dicts, or lists whose elements are records or tuples, in any state."""
    out: set[str] = set()
    for step in trace.steps:
        for name, value in step.vars.items():
            if isinstance(value, dict) or (isinstance(value, list) and any(_is_container(v) for v in value)):
                out.add(name)
    return out


def _hints(trace: Trace) -> Lanes:
    """The lane hints of the trace's mechanism (none for a name the registry does not know)."""
    mechanism = mechanisms().get(trace.mechanism)
    return mechanism.lanes if mechanism is not None else Lanes()


def _element_id(hints: Lanes, var: str, index: int, element: Json) -> str:
    width = hints.tuple_id.get(var)
    if width is not None and isinstance(element, list | tuple):
        return ":".join(str(v) for v in element[:width])
    if isinstance(element, dict):
        for field in _ID_FIELDS:
            ident = element.get(field)
            if isinstance(ident, str | int) and not isinstance(ident, bool):
                return str(ident)
    return str(index)


def _gather(lanes: dict[str, Json], name: str, items: Sequence[Json], actor: str, field: int) -> None:
    """Append each tuple of `items` to the lane of the actor its `field` names, under `name`."""
    for item in items:
        ident = item[field] if isinstance(item, list | tuple) and len(item) > field else "?"
        gathered = lanes.setdefault(f"{actor}[{ident}]", {})
        if isinstance(gathered, dict):
            listed = gathered.setdefault(name, [])
            if isinstance(listed, list):
                listed.append(item)


def _thread_lanes(state: Mapping[str, Json]) -> dict[str, Json]:
    """A lock-level scope's threads, one lane each: where the thread is (its next operation) and the locks it holds.

    Any scope that projects `threads` as `[name, next operation]` pairs and `locks` as lock -> holders gets them
    (the Key_Shared lock scope does), so a reader sees each thread's steps beside the locks it held at each.
    """
    threads, locks = state.get("threads"), state.get("locks")
    if not isinstance(threads, list) or not isinstance(locks, dict):
        return {}
    out: dict[str, Json] = {}
    for thread in threads:
        if isinstance(thread, list | tuple) and len(thread) == 2:
            name = thread[0]
            holds: list[Json] = [lock for lock, holders in sorted(locks.items())
                                 if isinstance(holders, list | tuple) and name in holders]
            out[f"thread[{name}]"] = {"at": thread[1], "holds": holds}
    return out


def actors_of(trace: Trace, state: Mapping[str, Json], actor_vars: set[str]) -> dict[str, Json]:
    """The state split into lanes: `var[id]` for each actor, `global` for the scalar variables, and one lane per
    thread (with the locks it holds) for a lock-level scope."""
    lanes: dict[str, Json] = _thread_lanes(state)
    hints = _hints(trace)
    drawn = ("threads", "locks") if lanes else ()
    scalars: dict[str, Json] = {}
    for name in sorted(state):
        if name in drawn:
            continue  # drawn as the thread lanes
        value = state[name]
        if name not in actor_vars:
            scalars[name] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                lanes[f"{name}[{key}]"] = item
        elif name in hints.actor_of and isinstance(value, list | tuple):
            _gather(lanes, name, value, *hints.actor_of[name])
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                lane = f"{name}[{_element_id(hints, name, index, item)}]"
                lanes[lane if lane not in lanes else f"{name}[{index}]"] = item
    if scalars:
        lanes = {GLOBAL: scalars, **lanes}
    return lanes


def lanes(trace: Trace) -> list[str]:
    """Every actor of the trace, in order of first appearance (`global` first when present)."""
    actor_vars = _actor_vars(trace)
    seen: dict[str, None] = {}
    for step in trace.steps:
        for lane in actors_of(trace, step.vars, actor_vars):
            seen.setdefault(lane, None)
    return list(seen)


def _flatten(value: Json | None, prefix: str, out: dict[str, Json | None]) -> None:
    """Leaves of a value by path; lists of scalars stay whole so a queue reads as one field."""
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list | tuple) and any(_is_container(v) for v in value):
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}[{index}]", out)
    else:
        out[prefix] = value


def _diff(lane: str, before: Json | None, after: Json | None) -> list[Change]:
    if before is None or after is None:
        return [Change(lane, "", before, after)] if before != after else []
    old: dict[str, Json | None] = {}
    new: dict[str, Json | None] = {}
    _flatten(before, "", old)
    _flatten(after, "", new)
    paths = list(dict.fromkeys([*old, *new]))
    changed = [p for p in paths if old.get(p) != new.get(p)]
    # a list that gained its first record (or lost its last) shows as the records, not as `[] -> ∅`
    shown = [p for p in changed if not any(q.startswith(f"{p}[") for q in changed)]
    return [Change(lane, p, old.get(p), new.get(p)) for p in shown]


def changes(trace: Trace) -> list[list[Change]]:
    """For each step, the fields that changed from the previous state (none for the first)."""
    actor_vars = _actor_vars(trace)
    states = [actors_of(trace, s.vars, actor_vars) for s in trace.steps]
    out: list[list[Change]] = [[]]
    for previous, current in itertools.pairwise(states):
        step: list[Change] = []
        for lane in dict.fromkeys([*previous, *current]):
            step.extend(_diff(lane, previous.get(lane), current.get(lane)))
        out.append(step)
    return out


def _failing_step(trace: Trace) -> int | None:
    """The first step with a violation, else the last state of a liveness or deadlock trace."""
    step = next((i for i, s in enumerate(trace.steps) if s.violations), None)
    recorded = trace.failure.get("step")
    if step is None and trace.failure.get("kind") in STUCK_KINDS and isinstance(recorded, int):
        return recorded
    return step


def _failed(trace: Trace, failing: int) -> list[tuple[str, str]]:
    """(heading, explanation) per failed property at the failing step."""
    violations = trace.steps[failing].violations
    if violations:
        explained = _explanations(trace, failing)
        return [(f"{name} violated at step {failing}", explained.get(name) or _statement(trace, name))
                for name in violations]
    names = trace.failure.get("names")
    kind, detail = trace.failure.get("kind"), str(trace.failure.get("detail", ""))
    return [(f"{name} ({kind}) fails from step {failing} on", detail) for name in names or []] if isinstance(
        names, list) else []


def _explanations(trace: Trace, step: int) -> dict[str, str]:
    """Each invariant's description (and the model's explanation at the failing state), if the model runs."""
    try:
        model = model_for(trace, "trace")
        state = model.initial()
        for action in trace.actions[:step]:
            state, _ = model.step(state, action)
    except (TraceError, ActionNotEnabled, KeyError, ValueError, TypeError):
        return {}  # the page still shows the recorded values; the model is only a bonus
    out: dict[str, str] = {}
    for inv in model.invariants:
        text = inv.description
        if inv.explain is not None and not inv.holds(state):
            text = f"{text} — {inv.explain(state)}" if text else inv.explain(state)
        out[inv.name] = text
    return out


def _statement(trace: Trace, name: str) -> str:
    """The statement of a property the model does not state (one only the reference is judged on), from the
    binding, as `brokerspec invariants` prints it; "" if the trace's mechanism is unknown."""
    try:
        return mechanism_for(trace, "trace").statement(name, trace.config)
    except (TraceError, ValueError, TypeError):
        return ""


def _action_label(trace: Trace, index: int) -> tuple[str, str]:
    action = trace.steps[index].action
    params = ", ".join(f"{k}={_compact(v, 40)}" for k, v in action.params)
    return action.name, params


def _change_text(change: Change) -> str:
    where = change.path or "(whole)"
    return f"{where}: {_compact(change.before, 60)} → {_compact(change.after, 60)}"


def _text(x: float, y: float, body: str, cls: str, limit: int | None = None) -> str:
    shown = body if limit is None or len(body) <= limit else body[: limit - 1] + "…"
    return f'<text x="{x:.0f}" y="{y:.0f}" class="{cls}"><title>{escape(body)}</title>{escape(shown)}</text>'


def _svg(trace: Trace, lane_names: Sequence[str], diffs: Sequence[Sequence[Change]], failing: int | None) -> str:
    width = _LABEL_W + _STEP_W * len(trace.steps) + 10
    height = _HEAD_H + _LANE_H * len(lane_names) + 10
    row = {lane: i for i, lane in enumerate(lane_names)}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="trace timeline">'
    ]
    for lane, i in row.items():
        y = _HEAD_H + i * _LANE_H
        shade = "lane-even" if i % 2 == 0 else "lane-odd"
        parts.append(f'<rect x="0" y="{y}" width="{width}" height="{_LANE_H}" class="{shade}"/>')
        parts.append(_text(6, y + 17, lane, "lane-label", 32))
    for index in range(len(trace.steps)):
        x = _LABEL_W + index * _STEP_W
        if index == failing:
            parts.append(f'<rect x="{x}" y="0" width="{_STEP_W}" height="{height}" class="failing-col"/>')
        parts.append(f'<line x1="{x}" y1="0" x2="{x}" y2="{height}" class="step-line"/>')
        name, params = _action_label(trace, index)
        parts.append(_text(x + 6, 18, f"{index}. {name}", "action", 24))
        parts.append(_text(x + 6, 36, params or "—", "params", _CELL_CHARS))
        by_lane: dict[str, list[Change]] = {}
        for change in diffs[index]:
            by_lane.setdefault(change.lane, []).append(change)
        for lane, lane_changes in by_lane.items():
            y = _HEAD_H + row[lane] * _LANE_H
            cls = "cell-fail" if index == failing else "cell"
            detail = "; ".join(_change_text(c) for c in lane_changes)
            parts.append(
                f'<rect x="{x + 4}" y="{y + 3}" width="{_STEP_W - 8}" height="{_LANE_H - 6}" rx="4" class="{cls}">'
                f"<title>{escape(detail)}</title></rect>"
            )
            first = lane_changes[0]
            summary = f"{first.path or lane}={_compact(first.after, 30)}"
            if len(lane_changes) > 1:
                summary += f" +{len(lane_changes) - 1}"
            parts.append(_text(x + 9, y + 17, summary, "cell-text", _CELL_CHARS))
    parts.append("</svg>")
    return "\n".join(parts)


_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #1b1f24; }
h1 { font-size: 1.3em; margin-bottom: 0.2em; }
.meta { color: #555; margin-top: 0; }
.failure { border: 2px solid #c62828; background: #fdecea; padding: 0.6em 1em; margin: 1em 0; }
.failure h2 { color: #c62828; font-size: 1.1em; margin: 0.2em 0; }
.ok { border: 2px solid #2e7d32; background: #e8f5e9; padding: 0.6em 1em; margin: 1em 0; }
.timeline { overflow-x: auto; border: 1px solid #ccc; }
table { border-collapse: collapse; margin-top: 1em; font-size: 0.9em; }
td, th { border: 1px solid #ccc; padding: 0.3em 0.5em; vertical-align: top; text-align: left; }
tr.failing td { background: #fdecea; }
code { font-family: monospace; white-space: pre-wrap; }
.lane-even { fill: #f6f8fa; } .lane-odd { fill: #ffffff; }
.lane-label { font: 12px monospace; fill: #1b1f24; }
.step-line { stroke: #d0d7de; }
.failing-col { fill: #fdecea; }
.action { font: bold 12px sans-serif; fill: #0b3d91; }
.params { font: 11px monospace; fill: #444; }
.cell { fill: #cfe3ff; stroke: #5b8def; }
.cell-fail { fill: #ffcdd2; stroke: #c62828; stroke-width: 2; }
.cell-text { font: 11px monospace; fill: #1b1f24; }
"""


def _failure_box(trace: Trace, failing: int | None, diffs: Sequence[Sequence[Change]]) -> str:
    if failing is None:
        return '<div class="ok">No invariant is violated in this trace.</div>'
    step = trace.steps[failing]
    items = [f"<h2>{escape(heading)}</h2>" + (f"<p>{escape(why)}</p>" if why else "")
             for heading, why in _failed(trace, failing)]
    action, params = _action_label(trace, failing)
    values = "".join(f"<li><code>{escape(c.lane)} {escape(_change_text(c))}</code></li>" for c in diffs[failing])
    state = actors_of(trace, step.vars, _actor_vars(trace))
    whole = "".join(f"<li><code>{escape(lane)} = {escape(_compact(v, 400))}</code></li>" for lane, v in state.items())
    return (
        '<div class="failure">' + "".join(items)
        + f"<p>after <code>{escape(action)}({escape(params)})</code>; the values that changed there:</p>"
        + f"<ul>{values or '<li>none (the state itself breaks it)</li>'}</ul>"
        + f"<details><summary>the whole failing state</summary><ul>{whole}</ul></details></div>"
    )


def _steps_table(trace: Trace, diffs: Sequence[Sequence[Change]], failing: int | None) -> str:
    rows = []
    for index, step in enumerate(trace.steps):
        action, params = _action_label(trace, index)
        changed = "<br>".join(f"<code>{escape(c.lane)} {escape(_change_text(c))}</code>" for c in diffs[index])
        cls = ' class="failing"' if index == failing else ""
        violated = step.violations or ((h for h, _ in _failed(trace, index)) if index == failing else ())
        rows.append(
            f"<tr{cls}><td>{index}</td><td><code>{escape(action)}</code></td><td><code>{escape(params)}</code></td>"
            f"<td>{changed}</td><td>{escape(', '.join(violated))}</td></tr>"
        )
    head = "<tr><th>step</th><th>action</th><th>parameters</th><th>changed fields</th><th>violated</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def render(trace: Trace) -> str:
    """The HTML page for `trace`: failure summary, SVG timeline, and the step table."""
    lane_names = lanes(trace)
    diffs = changes(trace)
    failing = _failing_step(trace)
    title = f"{trace.mechanism}/{trace.variant} — {trace.engine} trace, {len(trace.steps) - 1} steps"
    config = ", ".join(f"{k}={_compact(v, 40)}" for k, v in sorted(trace.config.items()))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1><p class=\"meta\">seed {escape(str(trace.seed))}; config: {escape(config)}</p>"
        + _failure_box(trace, failing, diffs)
        + f'<div class="timeline">{_svg(trace, lane_names, diffs, failing)}</div>'
        + _steps_table(trace, diffs, failing)
        + "</body></html>\n"
    )
