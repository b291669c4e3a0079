"""`FlowConfig`: the flows scope's configuration, read once per model, and what the step world
reads from it besides (size holder indices, message sizes, the JSON form of a reply) and the
initial state.

Separate so that the step world (`flow_frame.py` and above) can be typed by what it reads from
the model without importing the scope's action enumeration.
"""

from __future__ import annotations

from collections.abc import Mapping

from models.core import ConfigReader, Json, Param
from models.topiclist.common import BACKOFF_INITIAL_MS, BROKER_ERROR_MESSAGES, Msg, topics_hash, wire_size
from models.topiclist.configs import NAMESPACE, TOPIC_A, topic_tuple
from models.topiclist.flow_state import UNSET, Conn, FlowState, Holder
from models.topiclist.scope import ScopeBase


class FlowConfig(ScopeBase):
    """The flows scope's configuration keys (see `flows.py`), parsed, and what the world reads."""

    def _read_flows_config(self, cfg: Mapping[str, Param]) -> None:
        read = ConfigReader("topiclist", cfg)
        heap = (
            read.integer("heap_max", default=100),
            read.integer("heap_queue", default=2),
            read.integer("heap_timeout_ms", default=100),
        )
        direct = (
            read.integer("direct_max", default=100),
            read.integer("direct_queue", default=2),
            read.integer("direct_timeout_ms", default=100),
        )
        pl = cfg.get("proxy_limiter", "shared")
        if pl not in ("shared", "own"):
            raise ValueError(f"topiclist config 'proxy_limiter' must be 'shared' or 'own', not {pl!r}")
        self.own_proxy_limiter = pl == "own"
        pools = [heap, direct, heap, direct] if self.own_proxy_limiter else [heap, direct]
        self.pool_max = tuple(p[0] for p in pools)
        self.pool_queue = tuple(p[1] for p in pools)
        self.pool_timeout = tuple(p[2] for p in pools)
        self.proxy_lim = 2 if self.own_proxy_limiter else 0
        self.limiters: tuple[str, ...] = ("broker", "proxy") if self.own_proxy_limiter else ("broker",)
        self.lookup_max = read.integer("lookup_max", default=50000)
        self.proxy_lookup_max = read.integer("proxy_lookup_max", default=50000)
        self.nconns = read.integer("connections", default=1)
        self.namespaces = read.strings("namespaces", default=(NAMESPACE,))
        modes = read.strings("modes", default=("PERSISTENT",))
        self.modes = modes if "PERSISTENT" in modes else (*modes, "PERSISTENT")
        self.offered_modes = tuple(range(len(modes)))
        self.persistent_mode = self.modes.index("PERSISTENT")
        tl = cfg.get("topic_lists", ((TOPIC_A,),))
        if not isinstance(tl, tuple):
            raise ValueError("topiclist config 'topic_lists' must be a tuple of topic lists")
        self.topic_lists = tuple(topic_tuple(t, "topic_lists") for t in tl)
        flows = read.strings("flows", default=("broker",))
        for f in flows:
            if f not in ("broker", "proxy", "watch"):
                raise ValueError(f"topiclist config 'flows': unknown flow {f!r}")
        self.flows = flows
        # Each world (broker, proxy) has its own connections: broker connections come first.
        nb = self.nconns if ("broker" in flows or "watch" in flows) else 0
        npx = self.nconns if "proxy" in flows else 0
        self.broker_conns = tuple(range(nb))
        self.proxy_conns = tuple(range(nb, nb + npx))
        self.conn_worlds = ("broker",) * nb + ("proxy",) * npx
        self.use_hashes = read.flag("use_hashes", default=False)
        self.listing_errors = read.flag("listing_errors", default=True)
        self.broker_errors = read.strings("broker_errors", default=())
        for k in self.broker_errors:
            if k not in BROKER_ERROR_MESSAGES:
                raise ValueError(f"topiclist config 'broker_errors': unknown error kind {k!r}")
        self.write_failures = read.flag("write_failures", default=True)
        self.faults = read.flag("faults", default=True)
        self.allow_deny = read.flag("allow_deny", default=False)
        self.max_topic_changes = read.integer("max_topic_changes", default=0)
        tc = cfg.get("topic_changes", ())
        if not isinstance(tc, tuple):
            raise ValueError("topiclist config 'topic_changes' must be a tuple of (new, deleted) pairs")
        changes: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        for pair in tc:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(f"topiclist config 'topic_changes': bad pair {pair!r}")
            changes.append((topic_tuple(pair[0], "topic_changes"), topic_tuple(pair[1], "topic_changes")))
        self.topic_changes = tuple(changes)
        self.hashes: tuple[str, ...] = ("",)
        if self.use_hashes:
            self.hashes = ("", *dict.fromkeys(topics_hash(t) for t in self.topic_lists))
        nm = len(self.modes)
        self._holder_keys = tuple(
            f"{comp}:{ns}:{mode}" for comp in ("broker", "proxy") for ns in self.namespaces for mode in self.modes
        )
        self._nsm = len(self.namespaces) * nm
        self._nm = nm
        self._msg_sizes: dict[Msg, int] = {}

    def holder_index(self, comp: int, ns: int, mode: int) -> int:
        return comp * self._nsm + ns * self._nm + mode

    def msg_size(self, msg: Msg) -> int:
        size = self._msg_sizes.get(msg)
        if size is None:
            kind = msg[0]
            if kind == "GetTopicsResponse":
                strings: list[str] = [*msg[2], msg[3]]
            elif kind == "WatchSuccess":
                strings = [*msg[3], msg[2]]
            elif kind == "WatchUpdate":
                strings = [*msg[2], *msg[3], msg[4]]
            else:
                strings = []
            size = wire_size(strings)
            self._msg_sizes[msg] = size
        return size

    def reply_json(self, conn: int, msg: Msg) -> dict[str, Json]:
        """A reply attempt as the observations and variables show it."""
        kind = msg[0]
        d: dict[str, Json] = {"conn": conn, "type": kind}
        if kind == "Error":
            d.update(request=msg[1], code=msg[2], message=msg[3])
        elif kind == "GetTopicsResponse":
            d.update(request=msg[1], topics=list(msg[2]), hash=msg[3], changed=msg[4], filtered=msg[5])
        elif kind == "WatchSuccess":
            d.update(request=msg[1], watcher=msg[1], hash=msg[2], topics=list(msg[3]))
        elif kind == "WatchUpdate":
            d.update(watcher=msg[1], new=list(msg[2]), deleted=list(msg[3]), hash=msg[4])
        else:
            d.update(request=msg[1])
        return d

    def _initial_flows(self, execq: tuple[int, ...]) -> FlowState:
        npools = len(self.pool_max)
        return FlowState(
            0,
            tuple(max(m, 0) for m in self.pool_max),
            (False,) * npools,
            ((),) * npools,
            execq,
            (),
            tuple(Conn(True, (), BACKOFF_INITIAL_MS) for _ in self.conn_worlds),
            (Holder(UNSET, ()),) * (2 * self._nsm),
            (),
            self.lookup_max,
            (False,) * len(self.namespaces),
            0,
            ((0, 0),) * npools,
        )
