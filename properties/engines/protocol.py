"""The per-mechanism port vocabulary: meanings declared here, shapes and examples generated from the model.

A port author needs three things the model's code holds implicitly: the complete configuration the
hello carries, what every variable, field, action and parameter means, and when an action is
offered. The meanings are declared below per scope (a mechanism, or one scope of it), keyed by the
model's own names; the types, sample values and example observations come from a breadth-first
enumeration of each configuration's first `ENUMERATED_STATES` states, so they are deterministic (no
seed) and cannot drift. `missing` names whatever a model has and this table does not explain, which
the tests turn into a failure.

Paths name the parts of a value: `var`, `var[]` (an element of an array), `var.field` (a field of an
object, or a position of a tuple), `var.*` (every value of a map keyed by names). A meaning that
starts with a `[a, b, c]` layout declares a tuple: a fixed-length array whose positions are the fields
`a`, `b`, `c`.
"""

from __future__ import annotations

import json
import random
import re
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from models.core import Action, Json, Model, Observation, Param
from properties import registry
from properties.engines.lockstep import as_json
from properties.engines.mechanism import Mechanism

ENUMERATED_STATES = 200
"""States enumerated per configuration to infer types and collect examples (breadth-first, deterministic)."""
WALKS, WALK_LENGTH = 10, 40
"""Walks (with a fixed generator: no seed to pass) that reach the shapes breadth-first is too shallow for."""
_MAX_VALUES = 8
_LAYOUT = re.compile(r"^\[([a-z_0-9, ]+)\]")


@dataclass(frozen=True)
class ActionDoc:
    """What an action does, when the harness offers it, and what each parameter means."""

    meaning: str
    enabled: str
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Vocabulary:
    """The declared meanings of one scope; `defaults` are values the model reads but leaves out of its config."""

    config: Mapping[str, str]
    vars: Mapping[str, str]
    actions: Mapping[str, ActionDoc]
    observation: Mapping[str, str]
    defaults: Mapping[str, Param] = field(default_factory=dict)


def scope_of(mechanism: str, config: Mapping[str, Param]) -> str:
    """The vocabulary a configuration speaks: topiclist and keyshared have two scopes each."""
    if mechanism == "topiclist":
        return f"topiclist/{config.get('scope', 'semaphore')}"
    if mechanism == "keyshared" and config.get("scope") == "tracker":
        return "keyshared/tracker"
    return mechanism


def complete_config(model: Model[Any]) -> dict[str, Param]:
    """The model's configuration with every default it applies, as the hello carries it."""
    vocabulary = VOCABULARIES.get(scope_of(model.mechanism, model.config))
    defaults = vocabulary.defaults if vocabulary is not None else {}
    return {**model.config, **{k: v for k, v in defaults.items() if k not in model.config}}


def hello_config(mechanism: str, variant: str, config: Mapping[str, Param]) -> dict[str, Param]:
    """The hello's `config`: complete when the mechanism is known and accepts it, else as given."""
    try:
        model = registry.get(mechanism).make_model(config, variant)
    except (KeyError, ValueError, TypeError, ArithmeticError):
        return dict(config)
    return complete_config(model)


# -- enumeration -------------------------------------------------------------------------------------


def _layout(meaning: str | None) -> list[str]:
    found = _LAYOUT.match(meaning or "")
    return [name.strip() for name in found.group(1).split(",")] if found else []


def _walk(value: Json | Param | None, path: str, table: Mapping[str, str], out: dict[str, set[str]]) -> None:
    """Record the type of `value` at `path` and of every part of it, following the declared structure."""
    kinds = out.setdefault(path, set())
    if value is None:
        kinds.add("null")
    elif isinstance(value, bool):
        kinds.add("bool")
    elif isinstance(value, int):
        kinds.add("int")
    elif isinstance(value, str):
        kinds.add("string")
    elif isinstance(value, dict):
        if f"{path}.*" in table:
            kinds.add("map")
            for item in value.values():
                _walk(item, f"{path}.*", table, out)
        else:
            kinds.add("object")
            for name, item in value.items():
                _walk(item, f"{path}.{name}", table, out)
    elif layout := _layout(table.get(path)):
        kinds.add(f"[{', '.join(layout)}]")
        for i, item in enumerate(value):
            _walk(item, f"{path}.{layout[i] if i < len(layout) else i}", table, out)
    else:
        kinds.add("array")
        for item in value:
            _walk(item, f"{path}[]", table, out)


def _dump(value: Any) -> str:
    return json.dumps(as_json(value), separators=(", ", ": "))


@dataclass
class Sample:
    """What the first states of some configurations showed: types by path, parameter values, examples."""

    vars: dict[str, set[str]] = field(default_factory=dict)
    params: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    values: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    observation: dict[str, set[str]] = field(default_factory=dict)
    examples: dict[str, tuple[Action, Observation]] = field(default_factory=dict)

    def add(self, model: Model[Any], vocabulary: Vocabulary, states: int = ENUMERATED_STATES) -> None:
        """Enumerate `model` breadth-first (deduplicated by its state key) for `states` states, then take
        `WALKS` walks of `WALK_LENGTH` steps with a fixed generator, so deep shapes show up too."""
        initial = model.initial()
        seen: set[Hashable] = {model.key(initial)}
        queue: deque[Any] = deque([initial])
        visited = 0
        while queue and visited < states:
            visited += 1
            for after in self._visit(model, vocabulary, queue.popleft()):
                key = model.key(after)
                if key not in seen:
                    seen.add(key)
                    queue.append(after)
        rng = random.Random(0)
        for _ in range(WALKS):
            state = initial
            for _ in range(WALK_LENGTH):
                successors = self._visit(model, vocabulary, state)
                if not successors:
                    break
                state = rng.choice(successors)

    def _visit(self, model: Model[Any], vocabulary: Vocabulary, state: Any) -> list[Any]:
        """Record the shapes of `state` and of every enabled action from it; its successors."""
        for name, value in model.vars(state).items():
            _walk(value, name, vocabulary.vars, self.vars)
        successors = []
        for action in model.enabled(state):
            documented = vocabulary.actions.get(action.name)
            table = documented.params if documented is not None else {}
            found = self.params.setdefault(action.name, {})
            for name, value in action.params:
                _walk(value, name, table, found)
                self.values.setdefault((action.name, name), set()).add(_dump(value))
            after, observation = model.step(state, action)
            if observation is not None:
                for name, value in observation.items():
                    _walk(value, name, vocabulary.observation, self.observation)
            known = self.examples.get(action.name)
            if known is None or (_dump(observation).count("[]") < _dump(known[1]).count("[]")):
                self.examples[action.name] = (action, observation)
            successors.append(after)
        return successors


def missing(vocabulary: Vocabulary, models: Iterable[Model[Any]], sample: Sample) -> list[str]:
    """Everything the models show that `vocabulary` does not explain (empty when fully documented)."""
    out: list[str] = []
    for model in models:
        out += [f"var {v}" for v in model.vars(model.initial()) if v not in vocabulary.vars]
        out += [f"action {a}" for a in model.action_names if a not in vocabulary.actions]
        out += [f"config key {k}" for k in complete_config(model) if k not in vocabulary.config]
    out += [f"var path {p}" for p in sample.vars if p not in vocabulary.vars]
    out += [f"observation path {p}" for p in sample.observation if p not in vocabulary.observation]
    for action, params in sample.params.items():
        documented = vocabulary.actions.get(action)
        out += [f"parameter {action}.{p}" for p in params if documented is None or p not in documented.params]
    return sorted(set(out))


# -- the document ------------------------------------------------------------------------------------


def _type(kinds: set[str] | None) -> str:
    return "|".join(sorted(kinds)) if kinds else "(not reached in the enumerated states)"


def _configs(mechanism: Mechanism, names: Sequence[str] | None) -> list[tuple[str, str, Mapping[str, Param]]]:
    """(name, engine, configuration) of every explorer and Hypothesis configuration, or of `names`."""
    out = [(n, "explorer", c) for n, c in mechanism.explore_configs.items()]
    out += [(n, "hypothesis", c) for n, c in mechanism.hypothesis_configs.items()]
    if names is not None:
        unknown = sorted(set(names) - {n for n, _, _ in out})
        if unknown:
            known = ", ".join(dict.fromkeys(n for n, _, _ in out))
            raise ValueError(f"unknown config {unknown[0]!r} for {mechanism.name} (known: {known})")
        out = [entry for entry in out if entry[0] in names]
    return out


def document(mechanism: Mechanism, variant: str, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The vocabulary of `mechanism` for its configurations (or `names`), as plain JSON data."""
    default = next(iter(mechanism.hypothesis_configs))
    chosen = {(n, e) for n, e, _ in _configs(mechanism, names)}
    scopes: dict[str, dict[str, Any]] = {}
    models: dict[str, list[Model[Any]]] = {}
    for name, engine, config in _configs(mechanism, None):
        model = mechanism.make_model(config, variant)
        scope = scope_of(mechanism.name, model.config)
        models.setdefault(scope, []).append(model)  # types come from every configuration of the scope
        if (name, engine) in chosen:
            entry = scopes.setdefault(scope, {"scope": scope, "configs": []})
            entry["configs"].append({"name": name, "engine": engine, "verify_default": engine == "hypothesis"
                                     and name == default, "config": as_json(complete_config(model)),
                                     "actions": list(model.action_names), "initial_vars":
                                     as_json(model.vars(model.initial()))})
    out: list[dict[str, Any]] = []
    for scope, entry in scopes.items():
        vocabulary = VOCABULARIES[scope]
        sample = Sample()
        for model in models[scope]:
            sample.add(model, vocabulary)
        offered = {a: [c["name"] for c in entry["configs"] if a in c["actions"]]
                   for c in entry["configs"] for a in c["actions"]}
        config_keys = dict.fromkeys(k for c in entry["configs"] for k in c["config"])
        entry["config_keys"] = [{"key": k, "meaning": vocabulary.config.get(k, "")} for k in config_keys]
        entry["actions"] = [_action(name, vocabulary, sample, offered[name], len(entry["configs"]))
                            for name in vocabulary.actions if name in offered]
        entry["vars"] = [{"path": p, "type": _type(sample.vars.get(p)), "meaning": m}
                         for p, m in vocabulary.vars.items()]
        entry["observation"] = [{"path": p, "type": _type(sample.observation.get(p)), "meaning": m}
                                for p, m in vocabulary.observation.items()]
        entry["undocumented"] = missing(vocabulary, models[scope], sample)
        out.append(entry)
    return {"mechanism": mechanism.name, "variant": variant, "protocol": 1, "scopes": out}


def _action(name: str, vocabulary: Vocabulary, sample: Sample, offered: list[str], configs: int) -> dict[str, Any]:
    documented = vocabulary.actions[name]
    params = sample.params.get(name, {})
    top = [p for p in documented.params if "." not in p and "[" not in p]
    example = sample.examples.get(name)
    return {
        "name": name,
        "meaning": documented.meaning,
        "enabled": documented.enabled,
        "params": [{"name": p, "type": _type(params.get(p)), "meaning": documented.params[p],
                    "values": sorted(sample.values.get((name, p), ()), key=lambda v: (len(v), v))[:_MAX_VALUES]}
                   for p in top],
        "parts": [{"path": p, "type": _type(params.get(p)), "meaning": m}
                  for p, m in documented.params.items() if p not in top],
        "offered_by": offered if len(offered) < configs else "all",
        "example": None if example is None else {"params": as_json(example[0].as_dict()),
                                                  "observation": as_json(example[1])},
    }


def render(doc: Mapping[str, Any]) -> str:
    """The document as text for a port author; `--json` prints `doc` itself."""
    lines = [f"# {doc['mechanism']} port vocabulary, variant {doc['variant']} (meanings declared in "
             "properties/engines/protocol.py, types from the model; envelope and worked transcripts: docs/ports.md)"]
    for scope in doc["scopes"]:
        lines += ["", f"## scope {scope['scope']}", "", "configurations (the hello's config, complete with defaults; "
                  "verify sends the explorer configuration first, then the Hypothesis one of the same name):"]
        for c in scope["configs"]:
            tag = ", verify's default" if c["verify_default"] else ""
            lines += [f"  {c['name']} ({c['engine']}{tag}):", f"    {_dump(c['config'])}"]
        lines += ["", "config keys:"]
        lines += [f"  {k['key']}: {k['meaning']}" for k in scope["config_keys"]]
        lines += ["", "actions (step.action, step.params):"]
        for a in scope["actions"]:
            signature = ", ".join(f"{p['name']}: {p['type']}" for p in a["params"])
            lines.append(f"  {a['name']}({signature})  {a['meaning']}")
            lines.append(f"      enabled when: {a['enabled']}")
            if a["offered_by"] != "all":
                lines.append(f"      offered by: {', '.join(a['offered_by'])}")
            for p in a["params"]:
                more = ", ..." if len(p["values"]) == _MAX_VALUES else ""
                lines.append(f"      {p['name']}: {p['meaning']} (seen: {', '.join(p['values'])}{more})")
            lines += [f"      {p['path']}: {p['type']}  {p['meaning']}" for p in a["parts"]]
            if a["example"] is not None:
                lines.append(f"      e.g. {_dump(a['example']['params'])} -> {_dump(a['example']['observation'])}")
        lines += ["", "vars (reply.vars, exactly these keys):"]
        lines += [_part(v) for v in scope["vars"]]
        lines += ["", "observation fields (reply.observation; each action returns some of them):"]
        lines += [_part(o) for o in scope["observation"]]
        lines += ["", "initial vars (the ready message's):"]
        lines += [f"  {c['name']} ({c['engine']}): {_dump(c['initial_vars'])}" for c in scope["configs"]]
        if scope["undocumented"]:
            lines += ["", f"undocumented (a bug in properties/engines/protocol.py): {', '.join(scope['undocumented'])}"]
    return "\n".join(lines)


def _part(part: Mapping[str, str]) -> str:
    """One indented line per path; a tuple's layout is its type, so the meaning does not repeat it."""
    path, kind, meaning = part["path"], part["type"], part["meaning"]
    indent = "  " * (path.count(".") + path.count("[]"))
    return f"  {indent}{path}: {kind}  {meaning.removeprefix(kind).strip()}"


# -- the declared meanings ---------------------------------------------------------------------------

_TIME = "advance(dt): the virtual clock moves dt ms (timers due on the way run at their own times)"

_TOPICLIST_COMMON_CONFIG = {
    "scope": '"semaphore" (one AsyncSemaphore) or "flows" (the dual limiter behind the get-topics flows)',
    "dts": "clock advances offered as advance(dt)",
    "advance_next": "also offer advance(dt) reaching the next future executor entry",
    "max_requests": "budget of requests (semaphore: acquire/update calls that pass validation; flows: client requests)",
    "allow_close": "offer close",
}

_COMPLETED = {
    "completed": "futures completed during the step, in completion order",
    "completed[]": "one completed future",
    "completed[].request": "the request the future belongs to",
    "completed[].status": "granted, Timeout, QueueFull, AlreadyClosed, Cancelled (pool-side) or caller_cancelled",
    "completed[].permit": "on granted: the permit id created (ids count from 0 in grant order)",
    "completed[].permits": "on granted: the permit's value (its number of permits)",
}

TOPICLIST_SEMAPHORE = Vocabulary(
    config={
        **_TOPICLIST_COMMON_CONFIG,
        "max_permits": "pool size (<= 0: unbounded; then available_permits reports 2^63-1)",
        "max_queue_size": "queue bound (<= 0: unbounded); an acquire that would exceed it fails QueueFull",
        "timeout_ms": "acquire timeout; the deferred queue pass runs at timeout_ms // 2",
        "sizes": "permit counts offered to acquire and update",
        "invalid_sizes": "also offer -1 and max_permits+1, which fail with ValueError",
        "release_zero": "also offer release of permits whose value is already 0 (no-ops)",
    },
    defaults={"dts": (), "advance_next": True, "max_requests": 4, "allow_close": True, "max_permits": 4,
              "max_queue_size": 3, "timeout_ms": 100, "sizes": (1, 2), "invalid_sizes": False,
              "release_zero": False},
    vars={
        "now": "the virtual clock, ms",
        "available_permits": "permits left in the pool (2^63-1 when unbounded)",
        "acquired_permits": "max_permits - available_permits (0 when unbounded)",
        "queue_size": "number of queued requests",
        "closed": "close() was called",
        "queue": "the queued requests, head first",
        "queue[]": "a request id",
        "requests": "every request that passed validation, indexed by request id (ids count from 0)",
        "requests[]": "one request",
        "requests[].status": "pending, granted, or the failure it completed with (Timeout, QueueFull, AlreadyClosed, "
                             "Cancelled, caller_cancelled)",
        "requests[].cancelled": "its is_cancelled() is true (set by disconnect(request))",
        "requests[].permit": "present once granted: the permit id it created",
        "permits": "every permit ever granted, indexed by permit id: its current value (0 once released)",
        "permits[]": "a permit's value",
        "executor": "the executor's scheduled entries (timeouts, deferred queue passes), as absolute trigger times "
                    "in run order",
        "executor[]": "a trigger time, ms",
        "timeouts": "requests failed with Timeout so far",
        "waits": "wait-time observations so far: queued grants plus timeouts",
    },
    actions={
        "acquire": ActionDoc("acquire(permits): ask the pool for a new permit of `permits`",
                             "the request budget is not spent (invalid sizes: always)",
                             {"permits": "the permit count asked for"}),
        "update": ActionDoc("update(permit, permits): grow or shrink an existing permit to `permits` (a new request)",
                            "for every permit ever granted (valid sizes while the budget lasts)",
                            {"permit": "the permit id", "permits": "the new value"}),
        "release": ActionDoc("release(permit): give a permit's permits back to the pool",
                             "the permit's value is > 0 (or release_zero)", {"permit": "the permit id"}),
        "cancel": ActionDoc("cancel(request): the caller cancels the request's future",
                            "the request is pending", {"request": "the request id"}),
        "disconnect": ActionDoc("disconnect(request): the request's is_cancelled() turns true (its caller went away)",
                                "the request is pending and not yet cancelled", {"request": "the request id"}),
        "close": ActionDoc("close(): close the semaphore; queued requests fail AlreadyClosed",
                           "allow_close and not closed"),
        "step": ActionDoc("step(): run the earliest due executor entry", "an executor entry is due (trigger <= now)"),
        "advance": ActionDoc(_TIME, "always (dts, the next executor entry, or the smallest timeout when idle)",
                             {"dt": "ms to advance"}),
    },
    observation={
        **_COMPLETED,
        "request": "acquire/update: the new request's id",
        "status": "acquire/update: pending, granted or the failure it completed with at once",
        "permit": "acquire/update granted at once: the permit id",
        "permits": "acquire/update granted at once: the permit's value",
        "error": "an invalid permit count: ValueError (no request is created)",
        "message": "the ValueError's message, e.g. Invalid negative permits value: -1",
    },
)

_REPLY = "a reply the broker or proxy wrote to a connection (compared field by field)"
_REPLY_FIELDS = {
    "conn": "the connection", "type": "the reply type (GetTopicsResponse, WatchSuccess, WatchUpdate, Error, ...)",
    "request": "the request id answered", "code": "Error: the error code (TooManyRequests, ...)",
    "message": "Error: the error message", "topics": "the topics listed", "topics[]": "a topic name",
    "hash": "the topics hash sent", "filtered": "the listing was filtered",
    "changed": "the list changed against the request's topics_hash", "watcher": "the watcher id",
    "new": "WatchUpdate: topics added", "new[]": "a topic name", "deleted": "WatchUpdate: topics removed",
    "deleted[]": "a topic name",
}
TOPICLIST_FLOWS = Vocabulary(
    config={
        **_TOPICLIST_COMMON_CONFIG,
        "heap_max": "heap pool size in bytes (<= 0: unbounded)",
        "heap_queue": "heap pool queue bound",
        "heap_timeout_ms": "heap pool acquire timeout",
        "direct_max": "direct pool size in bytes (<= 0: unbounded)",
        "direct_queue": "direct pool queue bound",
        "direct_timeout_ms": "direct pool acquire timeout",
        "lookup_max": "broker lookup semaphore size",
        "proxy_lookup_max": "proxy lookup semaphore size (<= 0 refuses every proxy request)",
        "proxy_limiter": '"shared" (the proxy uses the broker\'s limiter) or "own" (pools 2 and 3 are the proxy\'s)',
        "connections": "client connections per world (broker connections are numbered first, then proxy ones)",
        "namespaces": 'namespace names ("tenant/ns")',
        "modes": "listing modes offered to get-topics (the watcher always uses PERSISTENT)",
        "topic_lists": "the topic lists a listing or broker response may return",
        "flows": 'which client requests are offered: subset of "broker", "proxy", "watch"',
        "use_hashes": "also offer requests carrying the topics_hash of each topic list",
        "listing_errors": "offer complete_listing(id, error)",
        "broker_errors": "error kinds offered to complete_broker_response(id, error_kind)",
        "write_failures": "offer complete_write(id, ok=false)",
        "faults": "offer arm_serialization_fault until the request's reply is serialized",
        "allow_deny": "offer deny_authorization",
        "max_topic_changes": "budget of topics_changed actions",
        "topic_changes": "the [new, deleted] pairs offered to topics_changed",
    },
    defaults={"dts": (), "advance_next": True, "max_requests": 4, "allow_close": True, "heap_max": 100,
              "heap_queue": 2, "heap_timeout_ms": 100, "direct_max": 100, "direct_queue": 2,
              "direct_timeout_ms": 100, "lookup_max": 50000, "proxy_lookup_max": 50000, "proxy_limiter": "shared",
              "connections": 1, "namespaces": ("public/default",), "modes": ("PERSISTENT",),
              "topic_lists": (("persistent://public/default/a",),), "flows": ("broker",), "use_hashes": False,
              "listing_errors": True, "broker_errors": (), "write_failures": True, "faults": True,
              "allow_deny": False, "max_topic_changes": 0, "topic_changes": ()},
    vars={
        "now": "the virtual clock, ms",
        "pools": "the memory pools: heap, direct (then the proxy's heap and direct when proxy_limiter is own)",
        "pools[]": "one pool (an AsyncSemaphore over bytes)",
        "pools[].name": "heap, direct, proxy-heap or proxy-direct",
        "pools[].available": "bytes left (2^63-1 when unbounded)",
        "pools[].acquired": "bytes acquired (0 when unbounded)",
        "pools[].closed": "the pool was closed",
        "pools[].queue": "queued acquires, head first",
        "pools[].queue[]": "[bytes, previous] a queued acquire: its size and, for an update, the owner's current "
                           "permit size (-1 for a fresh acquire)",
        "pools[].queue[].bytes": "bytes asked for",
        "pools[].queue[].previous": "the permit being updated's size, or -1",
        "pools[].timeouts": "acquires failed with Timeout so far",
        "pools[].waits": "wait-time observations so far: queued grants plus timeouts",
        "executor": "scheduled executor entries (timeouts, deferred passes, watcher retries) as absolute trigger times",
        "executor[]": "a trigger time, ms",
        "lookup_available": "permits left in the broker's lookup semaphore",
        "proxy_lookup_available": "the proxy's lookup semaphore size (held only inside the handler)",
        "holders": "the size caches: one per (world, namespace, mode)",
        "holders[]": "one size holder",
        "holders[].key": "world:namespace:mode",
        "holders[].state": "UNSET, INITIALIZING or KNOWN",
        "holders[].size": "the cached size estimate in bytes once KNOWN, else -1",
        "holders[].waiters": "requests waiting for the holder's first size",
        "connections": "client connections, by connection number",
        "connections[]": "one connection",
        "connections[].world": "broker or proxy",
        "connections[].active": "not disconnected",
        "connections[].backoff_ms": "the watcher retry backoff on this connection",
        "connections[].replies": "every reply attempt written to this connection, in order",
        "connections[].replies[]": _REPLY,
        **{f"connections[].replies[].{k}": v for k, v in _REPLY_FIELDS.items()},
        "listings": "requests whose namespace listing awaits complete_listing (by owning request id)",
        "listings[]": "a request id",
        "responses": "proxy requests whose broker response awaits complete_broker_response",
        "responses[]": "a request id",
        "writes": "reply writes, numbered in creation order",
        "writes[]": "one write",
        "writes[].id": "the write id (complete_write's id)",
        "writes[].request": "the request it answers",
        "writes[].pending": "awaits complete_write",
        "watchers": "the topic-list watchers (watcher id = the watch request id)",
        "watchers[]": "one watcher",
        "watchers[].id": "the watcher id",
        "watchers[].registered": "still registered on its connection",
        "watchers[].initializing": "its initial WatchSuccess is not yet written",
        "watchers[].live": "receives topics_changed updates",
        "watchers[].sending": "an update send is in progress",
        "watchers[].queued_updates": "updates waiting to be sent",
        "watchers[].topics": "the topics the watcher's client knows",
        "watchers[].topics[]": "a topic name",
        "denied": "namespaces whose authorization was denied",
        "denied[]": "a namespace",
    },
    actions={
        "get_topics": ActionDoc("a client's get-topics request to the broker",
                                "the connection is active and the request budget is not spent",
                                {"conn": "the connection", "request_id": "the next request id",
                                 "namespace": "the namespace", "mode": "the listing mode",
                                 "topics_hash": 'the client\'s topics hash, "" for none'}),
        "proxy_get_topics": ActionDoc("a client's get-topics request through the proxy",
                                      "a proxy connection is active and the request budget is not spent",
                                      {"conn": "the connection", "request_id": "the next request id",
                                       "namespace": "the namespace", "mode": "the listing mode",
                                       "topics_hash": 'the client\'s topics hash, "" for none'}),
        "watch": ActionDoc("a client opens a topic-list watcher", "as get_topics",
                           {"conn": "the connection", "request_id": "the next request id (= the watcher id)",
                            "namespace": "the namespace", "topics_hash": 'the client\'s topics hash, "" for none'}),
        "watch_close": ActionDoc("a client closes a watcher",
                                 "the watcher is registered, its connection active, the budget not spent",
                                 {"conn": "the connection", "request_id": "the next request id",
                                  "watcher_id": "the watcher"}),
        "topics_changed": ActionDoc("topics of a namespace are created or deleted",
                                    "a live watcher exists on the namespace and max_topic_changes is not spent",
                                    {"namespace": "the namespace", "new": "topics created", "new[]": "a topic",
                                     "deleted": "topics deleted", "deleted[]": "a topic"}),
        "complete_listing": ActionDoc("the namespace listing of a request completes (topics or error)",
                                      "the request awaits its listing",
                                      {"id": "the owning request", "topics": "the topics listed",
                                       "topics[]": "a topic", "error": "the listing's error message"}),
        "complete_broker_response": ActionDoc("the broker answers a proxied request (topics and hash, or an error)",
                                              "the proxy request awaits its broker response",
                                              {"id": "the owning request", "topics": "the topics",
                                               "topics[]": "a topic", "hash": "their hash",
                                               "error_kind": "the broker error kind"}),
        "complete_write": ActionDoc("a reply write completes (ok or failed)", "the write is pending",
                                    {"id": "the write id", "ok": "success"}),
        "arm_serialization_fault": ActionDoc("the request's reply will fail to serialize",
                                             "faults, and the request's reply is not yet serialized",
                                             {"request_id": "the request"}),
        "disconnect": ActionDoc("a client connection closes", "the connection is active", {"conn": "the connection"}),
        "deny_authorization": ActionDoc("authorization of a namespace is revoked",
                                        "allow_deny and the namespace is not yet denied",
                                        {"namespace": "the namespace"}),
        "close": ActionDoc("close a limiter (its heap and direct pools)", "allow_close and the limiter is open",
                           {"limiter": "broker or proxy"}),
        "step": ActionDoc("run the earliest due executor entry", "an executor entry is due (trigger <= now)"),
        "advance": ActionDoc(_TIME, "always (dts, the next executor entry, or the smallest timeout when idle)",
                             {"dt": "ms to advance"}),
    },
    observation={
        "replies": "reply attempts appended during the step, per connection in append order",
        "replies[]": _REPLY,
        **{f"replies[].{k}": v for k, v in _REPLY_FIELDS.items()},
    },
)

_POSITION = "[ledger, entry] a message position"
DELAYED = Vocabulary(
    config={
        "tick": "T, the tick time in ms (bucket precision P is the largest power of 2 <= T)",
        "strict": "strict mode: never offer before D (else up to T early)",
        "lookahead": "fixed-delay detection: should_pause may pause once this many are tracked (0: off)",
        "ledgers": "ledger ids; positions are ledgers x entries",
        "entries": "entry ids",
        "max_deliver_at": "the largest D offered; the clock stops at max_deliver_at + P - 1",
        "limits": "limits offered to get_scheduled",
        "round_size": "the limit of the round a timer fire (or a foreign run) triggers",
        "extra_deliver_at": "D values always offered to add",
        "extra_now": "clock values always offered to advance",
    },
    vars={
        "now": "the virtual clock, ms",
        "buckets": "the tracked messages in (bucket key, ledger, entry) order",
        "buckets[]": "[key, ledger, entry] a tracked message and the bucket key it is stored under",
        "buckets[].key": "the bucket key (D trimmed to precision P; rounded up in strict mode)",
        "buckets[].ledger": "ledger id",
        "buckets[].entry": "entry id",
        "count": "the tracker's count of tracked messages",
        "memory": "bytes of the roaring bitmaps, summed per (key, ledger)",
        "highest": "the highest D seen (fixed-delay detection)",
        "fixed": "every D so far was within tick of the highest (fixed-delay detection)",
        "timer": "[target, deadline] the armed timer; [] when none is armed",
        "timer.target": "the bucket key the armed timer is for",
        "timer.deadline": "when the timer fires, ms",
        "last_tick_run": "when the last timer run (fire or foreign run) happened",
        "deliver_at": "the dispatcher's exact D per position read so far",
        "deliver_at[]": "[ledger, entry, d] a position and its D (-1: no delay)",
        "deliver_at[].ledger": "ledger id",
        "deliver_at[].entry": "entry id",
        "deliver_at[].d": "deliver-at time, ms",
    },
    actions={
        "add": ActionDoc("a cursor read of a message through the dispatcher (tracked when its D is in the future)",
                         "for every position: D in the choices around bucket edges and the tick (first read) or its "
                         "own D (re-read)",
                         {"ledger": "ledger id", "entry": "entry id", "deliver_at": "D, ms (-1: no delay)"}),
        "advance": ActionDoc("move the clock to `now`", "now is a clock target: next ms, bucket edges, the head "
                             "bucket, the timer deadline, a message becoming deliverable",
                             {"now": "the new clock value (absolute)"}),
        "get_scheduled": ActionDoc("one dispatcher round: get_scheduled_messages(limit), then re-check each offer's D",
                                   "always (limit from config limits)", {"limit": "the round's limit"}),
        "fire": ActionDoc("the armed timer fires and runs a round of round_size",
                          "a timer is armed and now >= deadline"),
        "run": ActionDoc("run() called with a stale handle", "always",
                         {"handle": '"foreign" (an uncancelled stale handle: runs a round) or "cancelled" (no-op)'}),
        "should_pause": ActionDoc("the dispatcher asks should_pause_all_deliveries()", "always"),
        "clear": ActionDoc("clear the tracker (the armed timer stays, stale)", "always"),
    },
    observation={
        "delivered": "add: whether the message was delivered at once (not held); a round: the positions delivered",
        "delivered[]": _POSITION,
        "delivered[].ledger": "ledger id",
        "delivered[].entry": "entry id",
        "offered": "a round: the positions the tracker offered, in order",
        "offered[]": _POSITION,
        "offered[].ledger": "ledger id",
        "offered[].entry": "entry id",
        "pause": "should_pause's answer",
    },
)

_THREAD = "a thread name: N-event, N-batch-flusher, N-backend, N-worker-OrderedExecutor-i-0, client-c (N: the store)"
METADATA = Vocabulary(
    config={
        "store": "the store's name N (prefixes its thread names)",
        "paths": "the paths clients use",
        "initial": "paths present at t=0 (value 0, version 0)",
        "workers": "num_serdes_threads: decode workers; a path's worker is BookKeeper's chooseThread(path)",
        "clients": "client threads (client-0, ...)",
        "max_ops": "budget of client calls",
        "ops": "client actions offered",
        "batching": "the zk backend batches operations",
        "max_operations": "a batch flushes inline once it holds this many operations",
        "max_delay_ms": "P, the periodic flush interval",
        "close": "offer close",
    },
    vars={
        "now": "the virtual clock, ms",
        "closed": "the store is closed",
        "threads": "threads with work, by thread name (idle threads are left out)",
        "threads.*": "one thread",
        "threads.*.queue": "labels of its queued tasks, in order",
        "threads.*.queue[]": "a task label, e.g. async:get(/a), complete[0], notify:Modified(/a), N:periodic-flush",
        "threads.*.task": 'the label of the started task, "" when none',
        "threads.*.at": 'where the started task is suspended, "" when running or none',
        "threads.*.wait": 'what the blocked thread waits for (an op or lock label), "" when not blocked',
        "read_q": "op ids queued for the next batch's reads",
        "read_q[]": "an op id (index into ops)",
        "write_q": "op ids queued for the next batch's writes",
        "write_q[]": "an op id",
        "ops": "every store operation so far, by op id",
        "ops[]": "[label, outcome] one operation",
        "ops[].label": "kind(path), e.g. put(/a)",
        "ops[].outcome": 'pending; for get [value, version] or "absent"; for put the new version; for delete '
                         '"deleted"; or an error name',
        "ops[].outcome[]": "value, then version",
        "tree": "the backend's nodes by path",
        "tree.*": "[value, version] a node",
        "tree.*.value": "its value",
        "tree.*.version": "its version",
        "cache": "the MetadataCache's entries by path",
        "cache.*": '"pending", "failed", "absent" or [value, version]',
        "cache.*[]": "value, then version",
        "flush_lock": 'the thread holding the flush lock, "" when free',
        "flush_in_progress": "a flush is running",
        "key_locks": "per path, the thread holding its key lock",
        "key_locks.*": _THREAD,
        "flush_timer": "absolute time of the next periodic flush, -1 when none is scheduled",
        "deadlock": "the wait-for edges on a cycle (MD-I5), sorted; empty when none",
        "deadlock[]": "[waiter, holder, label] one edge",
        "deadlock[].waiter": "the blocked thread",
        "deadlock[].holder": "the thread it waits for",
        "deadlock[].label": "what it waits for",
        "stuck": "nothing can run and something still waits (a blocked thread or a pending op)",
    },
    actions={
        **{op: ActionDoc(f"client c calls {op}(p) on the store" if op in ("get", "put", "delete") else text,
                         "the client is idle, the call budget (max_ops) is not spent and the call is offered (ops)"
                         + (" and p is cached" if op == "refresh" else ""),
                         {"c": "the client index", "p": "the path", **({"q": "the path the callback reads"}
                                                                       if "callback" in op else {})})
           for op, text in (("get", ""), ("put", ""), ("delete", ""),
                            ("cache_get", "client c calls cache.get(p)"), ("refresh", "client c refreshes cached p"),
                            ("callback", "client c calls cache.get(p) with a callback that blocks on cache.get(q)"),
                            ("store_callback", "client c calls store.get(p) with a callback that blocks on "
                                               "store.get(q)"))},
        "run": ActionDoc("run one atomic segment of a thread", "the thread has runnable work (not blocked)",
                         {"thread": _THREAD}),
        "advance": ActionDoc("move the clock to the flush timer and submit the periodic flush", "a flush timer is set"),
        "close": ActionDoc("close the store: fail queued ops, cancel the flush, shut the threads down",
                           "config close, and calls are left and not closed, or nothing else can happen"),
    },
    observation={},
)

PIDQUOTA = Vocabulary(
    config={
        "window_ms": "W, the cache window in ms",
        "layer_count": "L >= 2 layers per window; W must be a multiple of L (dT = W / L)",
        "n_layer": "the per-layer design load: a rotation after this many merges",
        "principals": "principal names",
        "pids": "producer ids (distinct, >= 0)",
        "max_batch": "produce carries every ordered tuple of 1..max_batch distinct pids",
        "dts": "clock advances offered as advance(dt)",
        "boundaries": "also offer the advances that land on the next moment something changes",
        "cleanup": "offer cleanup",
        "hasher": '"exact" (pid x sets bit x) or "murmur" (the spec\'s Bloom hasher)',
    },
    vars={
        "now": "the virtual clock, ms",
        "next_cleanup": "when the manager's next scheduled clean_map runs (first at W, then every dT)",
        "entries": "the cache: one entry per principal present",
        "entries.*": "one principal's layered filter",
        "entries.*.count": "merges since the last rotation by count (advance_on_count)",
        "entries.*.next_rotation": "when the rotation timer is due (reported as max(due, now))",
        "entries.*.layers": "the layers, oldest first",
        "entries.*.layers[]": "[created, expires, bits] one layer",
        "entries.*.layers[].created": "when the layer was created",
        "entries.*.layers[].expires": "created + W",
        "entries.*.layers[].bits": "the set bits, ascending (exact hasher: the layer's pids)",
        "entries.*.layers[].bits[]": "a bit index",
    },
    actions={
        "produce": ActionDoc("the manager's on_produce: track each pid in order", "always",
                             {"principal": "the principal", "pids": "the batch, in tracking order",
                              "pids[]": "a producer id"}),
        "advance": ActionDoc(_TIME, "dt in dts, or (boundaries) a cleanup, rotation or layer age boundary",
                             {"dt": "ms to advance"}),
        "cleanup": ActionDoc("clean_map at the current time", "config cleanup"),
    },
    observation={
        "new": "produce: the pids counted new, in tracking order",
        "new[]": "a producer id",
        "removed": "advance/cleanup: principals whose entries clean_map removed, by name",
        "removed[]": "a principal",
    },
)

_PENDING_ACK = "[consumer, positions]"
KEYSHARED = Vocabulary(
    config={
        "names": "consumer names add may use",
        "keys": "message keys publish may use",
        "max_consumers": "consumers connected at once",
        "same_name": "a name may join while a consumer of that name is connected (it gets the next name index)",
        "max_messages": "how many messages may be published",
        "add_permits": "permits a consumer may join with",
        "flow": "permits one flow may grant",
        "max_permits": "flow is offered while it keeps the consumer's permits at most this",
        "points": "ring points per consumer",
        "range_max": "the hash range [1, range_max]",
        "read_batch_size": "the most entries one read asks for",
        "look_ahead_per_consumer": "look-ahead limit per consumer (replay queue size that stops normal reads)",
        "look_ahead_per_subscription": "look-ahead limit per subscription",
        "actions": "the kinds of steps the harness takes (read is always offered; begin_read brings complete_read)",
        "interleave": "interleaved_read runs its ack or flow at point 1..interleave of a pass",
        "disconnect_during_replay_read": "offer remove while a Replay read is in flight (a spec gap)",
        "exempt_nacked_p": "the replay filter also exempts a position released by a negative ack (a spec gap)",
    },
    vars={
        "messages": "the published log: message i is entry i of ledger 1 (its position)",
        "messages[]": "the message's key",
        "consumers": "connected consumers in join order",
        "consumers[]": "[id, name, name_index, permits] one consumer",
        "consumers[].id": "the consumer id (add's consumer: the smallest unused id from 1)",
        "consumers[].name": "its name",
        "consumers[].name_index": "the smallest index not used by a connected consumer of the same name",
        "consumers[].permits": "its available permits (flow adds, each delivery takes one)",
        "pending": "per consumer, the dispatcher's pending acks: positions sent and not yet acked or released",
        "pending[]": f"{_PENDING_ACK} in join order",
        "pending[].consumer": "the consumer id",
        "pending[].positions": "positions, ascending",
        "pending[].positions[]": "a position",
        "held": "per consumer, the client's record: delivered and not acked, redelivered or lost by disconnecting "
                "(KS-I1 is checked on it)",
        "held[]": f"{_PENDING_ACK} in join order",
        "held[].consumer": "the consumer id",
        "held[].positions": "positions, ascending",
        "held[].positions[]": "a position",
        "ring": "the consistent-hash ring: ranges tiling [1, range_max], each point selected by its earliest-joined "
                "claimer",
        "ring[]": "[start, end, consumer] a range and the consumer selected for it",
        "ring[].start": "first hash",
        "ring[].end": "last hash",
        "ring[].consumer": "the consumer id",
        "read_position": "the next entry a Normal read reads: mark_delete + 1 when the first consumer joins (no read "
                         "in flight); past the last entry read; raised to mark_delete + 1 when mark-delete passes it; "
                         "reset to mark_delete + 1 by a rewind",
        "mark_delete": "every position <= mark_delete is acked (-1 initially); moves up over contiguous acks",
        "acked": "positions individually acked above mark_delete, ascending",
        "acked[]": "a position",
        "replay": "the replay queue, ascending by position (a set: a position is in it at most once)",
        "replay[]": "[position, hash] a position to redeliver; hash 0 when re-added by a redelivery request",
        "replay[].position": "the position",
        "replay[].hash": "its sticky-key hash, or 0 (unknown)",
        "draining": "pip379: hashes whose previous owner still has pending acks of them",
        "draining[]": "[hash, consumer, ref_count, blocked] one draining hash",
        "draining[].hash": "the sticky-key hash",
        "draining[].consumer": "the consumer draining it (its previous owner)",
        "draining[].ref_count": "that consumer's pending acks of the hash; the entry goes at 0",
        "draining[].blocked": "a dispatch to the new owner was blocked by it",
        "recently_joined": "classic, pip282: consumers that joined while messages were outstanding",
        "recently_joined[]": "[consumer, position] the consumer and its join position",
        "recently_joined[].consumer": "the consumer id",
        "recently_joined[].position": "it may receive only positions below this",
        "last_sent": "pip282: [] or [the last sent position]",
        "last_sent[]": "a position",
        "sent": "pip282: positions individually sent above last_sent",
        "sent[]": "a position",
        "scheduled_read": "a read is scheduled (fire performs it)",
        "skip_next_replay": "pip379, pip282: the next read skips the replay queue to trigger look-ahead",
        "stuck_on_replays": "classic: is_dispatcher_stuck_on_replays",
        "reads_in_flight": "storage reads begun and not completed (at most one per kind)",
        "reads_in_flight[]": "[kind, positions] one read",
        "reads_in_flight[].kind": "Normal or Replay",
        "reads_in_flight[].positions": "the positions read",
        "reads_in_flight[].positions[]": "a position",
        "rewind_pending": "the first consumer joined while a read was in flight: when the last read completes, "
                          "read_position goes back to mark_delete + 1",
        "nacked": "the client's record: positions released by a redelivery request since delivered, unacked",
        "nacked[]": "a position",
        "settled": "settle was taken: no more add, remove, publish, redeliver, interleaved_read or settle",
        "pinned": "positions the stubborn consumer never acks (ack is not offered for them)",
        "pinned[]": "a position",
        "events": "what the step did that no variable shows (promoted, unblocked_in_pass, came_back); reset each step",
        "events[]": "an event name",
    },
    actions={
        "add": ActionDoc("a consumer connects (joins the ring; pip379 registers draining hashes for its new ranges)",
                         "not settled and fewer than max_consumers are connected (same_name: else only unused names)",
                         {"consumer": "its id: the smallest unused id from 1", "name": "its name",
                          "permits": "its initial permits"}),
        "remove": ActionDoc("a consumer disconnects: its pending acks go to the replay queue",
                            "not settled (and no Replay read in flight unless disconnect_during_replay_read)",
                            {"consumer": "the consumer id"}),
        "publish": ActionDoc("a producer appends a message", "not settled and fewer than max_messages published",
                             {"key": "the message key"}),
        "flow": ActionDoc("a consumer grants permits", "its permits + n <= max_permits",
                          {"consumer": "the consumer id", "n": "permits granted"}),
        "ack": ActionDoc("a consumer acks a position it holds", "the consumer holds the position and it is not pinned",
                         {"consumer": "the consumer id", "position": "the position"}),
        "redeliver": ActionDoc("a negative ack of one held position: it goes to the replay queue with hash 0",
                               "not settled and the consumer holds the position",
                               {"consumer": "the consumer id", "position": "the position"}),
        "redeliver_all": ActionDoc("redeliver every message the consumer holds", "not settled and it holds some",
                                   {"consumer": "the consumer id"}),
        "read": ActionDoc("the dispatcher reads and dispatches once (begin_read then complete_read)", "always"),
        "fire": ActionDoc("the scheduled read runs", "scheduled_read"),
        "run": ActionDoc("the dispatcher reads until nothing changes (at most 1000 reads)", "always"),
        "begin_read": ActionDoc("the dispatcher begins a storage read (replay first, else normal); observes it",
                                "a read kind is not in flight"),
        "complete_read": ActionDoc("a storage read completes and is dispatched", "a read of that kind is in flight",
                                   {"kind": "Normal or Replay"}),
        "interleaved_read": ActionDoc("a read during which an ack or flow runs at a point of a dispatch pass",
                                      "not settled, some consumer connected, and the inner ack or flow is enabled",
                                      {"stage": "replay_filter or dispatch", "index": "the point of the pass (1..)",
                                       "inner": "[action, consumer, value] the inner ack or flow",
                                       "inner.action": "ack or flow", "inner.consumer": "the consumer id",
                                       "inner.value": "the ack's position or the flow's n"}),
        "settle": ActionDoc("commit the rest of the run: no more consumer changes, publishing or negative acks",
                            "not settled and some consumer connected (stubborn: one holding messages)",
                            {"stubborn": "0, or the consumer that never acks what it holds now (pinned)"}),
    },
    observation={
        "delivered": "messages dispatched during the step, in send order",
        "delivered[]": "[consumer, position] one delivery",
        "delivered[].consumer": "the consumer id",
        "delivered[].position": "the position",
        "read": '[kind, positions] begin_read: the read begun, or ["None", []] when nothing is read',
        "read.kind": "Normal, Replay or None",
        "read.positions": "the positions read",
        "read.positions[]": "a position",
    },
)

_TRACKER_POSITION = "[ledger, entry, hash] a position and its sticky-key hash"
KEYSHARED_TRACKER = Vocabulary(
    config={
        "scope": '"tracker": PendingAcksMap and DrainingHashesTracker only',
        "consumers": "consumers, numbered from 1 (named consumer1, ...)",
        "position_hashes": "position p's fixed sticky-key hash (0: no hash)",
        "position_ledgers": "position p's ledger (empty: all ledger 1); maps order positions by (ledger, entry)",
        "batch_sizes": "the remaining-unacked counts an add may carry",
        "max_batch_level": "how deep the harness nests start_batch",
    },
    vars={
        "consumers": "every consumer, by id",
        "consumers[]": "[id, name, closed] one consumer",
        "consumers[].id": "the consumer id",
        "consumers[].name": "consumer<id>",
        "consumers[].closed": "its pending-acks map was closed (for_each_and_close)",
        "owners": "the selector: per configured non-zero hash, ascending, the consumer owning it; initially hash i "
                  "(in ascending order) is owned by consumer i mod consumers + 1",
        "owners[]": "[hash, consumer] a hash and its owner",
        "owners[].hash": "a hash",
        "owners[].consumer": "its owner",
        "pending": "per consumer, its pending-acks map in (ledger, entry) order",
        "pending[]": "[consumer, acks] one consumer's map",
        "pending[].consumer": "the consumer id",
        "pending[].acks": "its pending acks",
        "pending[].acks[]": "[ledger, entry, remaining, hash] one pending ack",
        "pending[].acks[].ledger": "ledger id",
        "pending[].acks[].entry": "entry id (the position)",
        "pending[].acks[].remaining": "the batch's remaining-unacked count",
        "pending[].acks[].hash": "its sticky-key hash",
        "draining": "the tracker's entries: hashes whose previous owner still has pending acks of them",
        "draining[]": "[hash, consumer, ref_count, blocked] one entry",
        "draining[].hash": "the hash",
        "draining[].consumer": "the consumer draining it (not its owner)",
        "draining[].ref_count": "that consumer's pending acks of the hash; the entry goes at 0",
        "draining[].blocked": "should_block_sticky_key_hash returned true for it (blocked_count > 0)",
        "batch_level": "the tracker's batch nesting depth",
        "unblocked_while_batching": "an unblock happened inside the current batch (reported at its end as -1)",
        "replay": "positions the add handler refused (awaiting replay), in refusal order, until added",
        "replay[]": _TRACKER_POSITION,
        "replay[].ledger": "ledger id",
        "replay[].entry": "entry id",
        "replay[].hash": "its hash",
        "events": "what the step did that no variable shows (overwrote, kept_mismatch, hash_not_set, "
                  "across_ledgers); reset each step",
        "events[]": "an event name",
    },
    actions={
        "add_pending_ack_if_allowed": ActionDoc(
            "a send of a position to the hash's owner: the add handler may refuse it (draining elsewhere)",
            "consumer owns hash (hash 0: any open consumer) and no other consumer holds the position",
            {"consumer": "the consumer id", "position": "the entry id", "batch_size": "remaining-unacked count",
             "hash": "the position's hash"}),
        "remove": ActionDoc("an individual ack of a held position (the remove handler releases its hash)",
                            "the consumer holds the position; with batch_size and hash: the 4-argument form, "
                            "removing only if the stored value matches",
                            {"consumer": "the consumer id", "position": "the entry id",
                             "batch_size": "4-argument form: the expected remaining count",
                             "hash": "4-argument form: the expected hash"}),
        "remove_and_get_remaining_unacked": ActionDoc("remove a held position, observing its remaining count",
                                                      "the consumer holds the position",
                                                      {"consumer": "the consumer id", "position": "the entry id"}),
        "remove_all_up_to": ActionDoc("a mark-delete move: remove every position up to (ledger, entry) of `position`",
                                      "the consumer holds a position at or below it in map order",
                                      {"consumer": "the consumer id", "position": "the entry id"}),
        "for_each_and_clear": ActionDoc("redeliver everything the consumer holds (removals may unblock)",
                                        "the consumer is open", {"consumer": "the consumer id"}),
        "for_each_and_close": ActionDoc("the consumer disconnects: removals never unblock, the map closes",
                                        "the consumer is open", {"consumer": "the consumer id"}),
        "should_block_sticky_key_hash": ActionDoc(
            "the dispatcher asks whether a send of the hash to its owner must wait (draining elsewhere)",
            "consumer is the hash's owner and open (hash 0: any open consumer)",
            {"consumer": "the asking consumer", "hash": "the hash"}),
        "move_hash": ActionDoc("the selector moves a hash to another open consumer; register_draining_hashes runs",
                               "consumer is open and not the hash's owner",
                               {"hash": "the hash", "consumer": "the new owner"}),
        "start_batch": ActionDoc("the tracker's start_batch", "batch_level < max_batch_level"),
        "end_batch": ActionDoc("the tracker's end_batch (an outermost end reports one unblock, -1, if any happened)",
                               "batch_level > 0"),
    },
    observation={
        "unblocked": "the unblocking handler's arguments during the step, in call order",
        "unblocked[]": "a hash, or -1 for the one call at the end of an outermost batch",
        "added": "add_pending_ack_if_allowed: whether the add handler accepted it",
        "error": "the Java exception's simple name (IllegalArgumentException for hash 0)",
        "blocked": "should_block_sticky_key_hash's answer",
        "removed": "remove: a bool; remove_and_get_remaining_unacked: the remaining count or -1; batch removals: "
                   "the positions visited in order",
        "removed[]": _TRACKER_POSITION,
        "removed[].ledger": "ledger id",
        "removed[].entry": "entry id",
        "removed[].hash": "its hash",
    },
)

VOCABULARIES: dict[str, Vocabulary] = {
    "topiclist/semaphore": TOPICLIST_SEMAPHORE,
    "topiclist/flows": TOPICLIST_FLOWS,
    "delayed": DELAYED,
    "metadata": METADATA,
    "pidquota": PIDQUOTA,
    "keyshared": KEYSHARED,
    "keyshared/tracker": KEYSHARED_TRACKER,
}
"""Every scope's meanings; `missing` checks them against the models."""


def describe(mechanism: Mechanism, variant: str, names: Sequence[str] | None = None, *, as_json: bool = False) -> str:
    """`brokerspec protocol`'s output: the text for a port author, or the JSON document for tools."""
    doc = document(mechanism, variant, names)
    return json.dumps(doc, indent=1) if as_json else render(doc)
