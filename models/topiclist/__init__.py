"""The executable spec of the PIP-442 topic-list memory limiter (`docs/spec/topiclist.md`).

A pure transition system, written from the spec independently of `reference_impl/topiclist/`, so
that the two can be run in lockstep (`properties/topiclist/binding.py`). Two scopes, selected by the
config key `scope`:

* ``"semaphore"``: one `AsyncSemaphore` (§4.1-4.5) driven directly by the harness.
* ``"flows"``: a dual limiter (heap + direct; optionally a second one owned by the proxy) used by
  the broker get-topics flow, the proxy get-topics flow and the topic-list watcher (§4.6-4.8),
  with the harness actions of §2.3. Broker and proxy are separate worlds, each with its own
  connections, lookup semaphore and size cache, as in the reference.

**States** are immutable NamedTuples (`SemState`, `FlowState`) of ints, bools, strings and
tuples. Time is kept **relative**: an executor entry is an int holding its trigger time minus
`now` (and kind, pool, argument), in (trigger time, seq) order; `key` leaves out `now` (and, for
flows, the metric counters, which watcher retries could grow without bound), so states that differ
by a shift of the clock are one state. Everything else is bounded by the configured budgets, and
every id is bounded: a pending listing or broker response is named by the client request that owns it
(a flow never has two at once), and writes are numbered in creation order (one per reply write).

The package holds one module per scope and the shared pieces below them (no module imports one
above it):

``model.py``       `TopicListModel`: common keys, scope choice, dispatch of the model protocol
``semaphore.py``   the semaphore scope: state, step world, actions, projection, invariants
``flows.py``       the flows scope: actions and steps, over its own modules (``flow_*.py``:
                   state, configuration, step world, projection and invariants; `flows.py`
                   lists them)
``scope.py``       `ScopeBase`: attributes and time actions (``step``, ``advance``) both scopes use
``pools.py``       `Pools`: the semaphore mechanics of §4.1-4.5 over one or more pools
``configs.py``     variants, typical configurations, configuration keys and their parsers
``common.py``      sizes and hash, executor entries, outcome codes, error and reply texts

Each scope's module lists its actions, observations and configuration keys.

Where the spec is silent the model follows the reference (and upstream): the permit exceptions'
texts; the watcher resets its size holder when its listing step fails; `watch_close` answers the
initializing watch request before the close request; a watcher send checks the connection and the
registration before acquiring; an oversized or unserializable WatchSuccess is answered with
MetadataError; after a send stops quietly, queued updates are still attempted.
"""

from models.topiclist.common import INITIAL_ESTIMATE, LONG_MAX, heap_size, topics_hash, wire_size
from models.topiclist.configs import (
    EXPLORE_ALL_FLOWS_CONFIG,
    EXPLORE_CONFIG,
    EXPLORE_FLOWS_CONFIG,
    HYPOTHESIS_CONFIG,
    HYPOTHESIS_FLOWS_CONFIG,
    VARIANTS,
)
from models.topiclist.flow_state import FlowState
from models.topiclist.model import TLState, TopicListModel
from models.topiclist.semaphore import SemState

__all__ = [
    "EXPLORE_ALL_FLOWS_CONFIG",
    "EXPLORE_CONFIG",
    "EXPLORE_FLOWS_CONFIG",
    "HYPOTHESIS_CONFIG",
    "HYPOTHESIS_FLOWS_CONFIG",
    "INITIAL_ESTIMATE",
    "LONG_MAX",
    "VARIANTS",
    "FlowState",
    "SemState",
    "TLState",
    "TopicListModel",
    "heap_size",
    "topics_hash",
    "wire_size",
]
