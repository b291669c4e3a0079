#!/usr/bin/env node
// A brokerspec port of Key_Shared's tracker scope (keyshared, `--config tracker`), written from
// docs/ports.md and `brokerspec protocol --mechanism keyshared --config tracker` alone: Pulsar's
// PendingAcksMap and DrainingHashesTracker (PIP-379), and the dispatcher's add and remove handlers
// that connect them, in plain Node (no packages).
//
// It speaks protocol 2 and announces `reset` (one process serves every walk of a verify) and
// `pipeline` (it answers the steps of a chunk in order, however many were sent ahead).
//
// Planted bugs, one at a time, with `--bug=NAME` (tests/ports/test_node_port.py checks verify catches each):
//   closing-unblock   the unblocking handler is also called for a closing removal (for_each_and_close)
//   batch-any-level   a batch's deferred unblock fires at the end of any batch, not only the outermost
//   reset-leak        reset forgets the replay queue (the refused positions of the last walk stay)
'use strict';

const PROTOCOL = 2;
const STICKY_KEY_HASH_NOT_SET = 0;
const PENDING_ACK_NOT_FOUND = -1;
const UNBLOCKED_IN_BATCH = -1;

const bug = (process.argv.find((a) => a.startsWith('--bug=')) || '').slice('--bug='.length);

/** Order of positions [ledger, entry]: by ledger, then entry, as the maps and the cursor order them. */
function comparePositions(a, b) {
  return a[0] - b[0] || a[1] - b[1];
}

/** The consumer draining a hash, its pending acks of the hash, and how often it blocked others. */
class DrainingHashEntry {
  constructor(consumer) {
    this.consumer = consumer;
    this.refCount = 0;
    this.blockedCount = 0;
  }
}

/** Pulsar's DrainingHashesTracker; per-consumer draining stats are left out. */
class DrainingHashesTracker {
  constructor(unblockingHandler) {
    this.unblockingHandler = unblockingHandler;
    this.drainingHashes = new Map();
    this.batchLevel = 0;
    this.unblockedWhileBatching = false;
  }

  addEntry(consumer, stickyHash) {
    if (stickyHash === STICKY_KEY_HASH_NOT_SET) throw new Error('IllegalArgumentException: Sticky hash cannot be 0');
    let entry = this.drainingHashes.get(stickyHash);
    if (entry === undefined) {
      entry = new DrainingHashEntry(consumer);
      this.drainingHashes.set(stickyHash, entry);
    }
    if (entry.consumer !== consumer) throw new Error(`IllegalStateException: hash ${stickyHash} drained twice`);
    entry.refCount++;
  }

  reduceRefCount(consumer, stickyHash, closing) {
    if (stickyHash === STICKY_KEY_HASH_NOT_SET) return;
    const entry = this.drainingHashes.get(stickyHash);
    if (entry === undefined) return;
    if (entry.consumer !== consumer) throw new Error(`IllegalStateException: hash ${stickyHash} not drained here`);
    if (--entry.refCount > 0) return;
    this.drainingHashes.delete(stickyHash);
    if ((!closing || bug === 'closing-unblock') && entry.blockedCount > 0) {
      if (this.batchLevel > 0) this.unblockedWhileBatching = true;
      else this.unblockingHandler(stickyHash);
    }
  }

  shouldBlockStickyKeyHash(consumer, stickyHash) {
    if (stickyHash === STICKY_KEY_HASH_NOT_SET) return false;
    const entry = this.drainingHashes.get(stickyHash);
    if (entry === undefined) return false;
    if (entry.consumer === consumer) { // the hash came back to its drainer
      this.drainingHashes.delete(stickyHash);
      return false;
    }
    entry.blockedCount++;
    return true;
  }

  getEntry(stickyHash) {
    return stickyHash === STICKY_KEY_HASH_NOT_SET ? undefined : this.drainingHashes.get(stickyHash);
  }

  startBatch() {
    this.batchLevel++;
  }

  endBatch() {
    this.batchLevel--;
    if ((this.batchLevel === 0 || bug === 'batch-any-level') && this.unblockedWhileBatching) {
      this.unblockedWhileBatching = false;
      this.unblockingHandler(UNBLOCKED_IN_BATCH);
    }
  }
}

/** Pulsar's PendingAcksMap: one consumer's pending acks by (ledger, entry), with the dispatcher's handlers. */
class PendingAcksMap {
  constructor(consumer, addHandler, removeHandler) {
    this.consumer = consumer;
    this.addHandler = addHandler;
    this.removeHandler = removeHandler;
    this.acks = new Map(); // key "ledger:entry" -> {ledger, entry, batchSize, hash}
    this.closed = false;
  }

  sorted() {
    return [...this.acks.values()].sort((a, b) => comparePositions([a.ledger, a.entry], [b.ledger, b.entry]));
  }

  addPendingAckIfAllowed(ledger, entry, batchSize, hash) {
    if (this.closed) return false;
    if (!this.addHandler(this.consumer, ledger, entry, hash)) return false;
    this.acks.set(`${ledger}:${entry}`, {ledger, entry, batchSize, hash});
    return true;
  }

  remove(ledger, entry) {
    const key = `${ledger}:${entry}`;
    const value = this.acks.get(key);
    if (value === undefined) return false;
    this.acks.delete(key);
    this.removeHandler.handleRemoving(this.consumer, value.hash, this.closed);
    return true;
  }

  removeExact(ledger, entry, batchSize, hash) {
    const value = this.acks.get(`${ledger}:${entry}`);
    if (value === undefined || value.batchSize !== batchSize || value.hash !== hash) return false;
    return this.remove(ledger, entry);
  }

  removeAndGetRemainingUnacked(ledger, entry) {
    const value = this.acks.get(`${ledger}:${entry}`);
    if (value === undefined) return PENDING_ACK_NOT_FOUND;
    this.remove(ledger, entry);
    return value.batchSize;
  }

  /** The removals of one call in one batch of the remove handler; `visit` sees each, in map order. */
  drain(doomed, visit) {
    if (doomed.length === 0) return;
    this.removeHandler.startBatch();
    try {
      for (const value of doomed) {
        this.acks.delete(`${value.ledger}:${value.entry}`);
        this.removeHandler.handleRemoving(this.consumer, value.hash, this.closed);
        visit(value);
      }
    } finally {
      this.removeHandler.endBatch();
    }
  }

  removeAllUpTo(ledger, entry, visit) {
    this.drain(this.sorted().filter((v) => comparePositions([v.ledger, v.entry], [ledger, entry]) <= 0), visit);
  }

  forEachAndClear(visit) {
    this.drain(this.sorted(), visit);
  }

  forEachAndClose(visit) {
    this.closed = true;
    this.drain(this.sorted(), visit);
  }
}

/** The tracker scope: consumers with their maps, an owner per hash (the selector), the replay queue. */
class TrackerScope {
  constructor(config) {
    this.positionHashes = config.position_hashes;
    this.ledgers = config.position_hashes.map((_, p) => (config.position_ledgers.length ? config.position_ledgers[p] : 1));
    this.unblocked = [];
    this.events = new Set();
    this.replay = new Map(); // "ledger:entry" -> [ledger, entry, hash]
    this.tracker = new DrainingHashesTracker((hash) => this.unblocked.push(hash));
    const removeHandler = {
      handleRemoving: (consumer, hash, closing) => this.tracker.reduceRefCount(consumer, hash, closing),
      startBatch: () => this.tracker.startBatch(),
      endBatch: () => this.tracker.endBatch(),
    };
    this.consumers = [];
    for (let id = 1; id <= config.consumers; id++) {
      const consumer = {id, name: `consumer${id}`};
      consumer.pendingAcks = new PendingAcksMap(consumer, (c, l, e, h) => this.handleAdding(c, l, e, h), removeHandler);
      this.consumers.push(consumer);
    }
    const hashes = [...new Set(this.positionHashes.filter((h) => h !== STICKY_KEY_HASH_NOT_SET))].sort((a, b) => a - b);
    this.owners = new Map(hashes.map((h, i) => [h, this.consumers[i % this.consumers.length]]));
  }

  /** The dispatcher's add handler: refuse a hash another consumer drains; the refused position waits for replay. */
  handleAdding(consumer, ledger, entry, hash) {
    if (hash === STICKY_KEY_HASH_NOT_SET) throw new Error('IllegalArgumentException');
    const draining = this.tracker.getEntry(hash);
    if (draining !== undefined && draining.consumer !== consumer) {
      this.replay.set(`${ledger}:${entry}`, [ledger, entry, hash]);
      return false;
    }
    return true;
  }

  /** registerDrainingHashes for one hash moved to `target`: all REMOVE work, then all ADD work. */
  moveHash(hash, target) {
    const before = this.owners.get(hash);
    this.owners.set(hash, target);
    for (const ack of before.pendingAcks.sorted()) {
      if (ack.hash === hash) this.tracker.addEntry(before, hash);
    }
    for (const ack of target.pendingAcks.sorted()) {
      const draining = this.tracker.getEntry(hash);
      if (ack.hash === hash && draining !== undefined && draining.consumer === target) {
        this.tracker.reduceRefCount(target, hash, false);
      }
    }
  }

  apply(action, params) {
    this.unblocked = [];
    this.events.clear();
    const consumer = params.consumer === undefined ? undefined : this.consumers[params.consumer - 1];
    const ledger = params.position === undefined ? undefined : this.ledgers[params.position];
    const entry = params.position;
    const removed = [];
    const visit = (v) => removed.push([v.ledger, v.entry, v.hash]);
    const observation = {};
    switch (action) {
      case 'add_pending_ack_if_allowed': {
        const held = consumer.pendingAcks.acks.has(`${ledger}:${entry}`);
        try {
          const added = consumer.pendingAcks.addPendingAckIfAllowed(ledger, entry, params.batch_size, params.hash);
          if (added) {
            if (held) this.events.add('overwrote');
            this.replay.delete(`${ledger}:${entry}`);
          }
          observation.added = added;
        } catch (e) {
          if (!String(e.message).startsWith('IllegalArgumentException')) throw e;
          this.events.add('hash_not_set');
          observation.error = 'IllegalArgumentException';
        }
        break;
      }
      case 'remove':
        if (params.batch_size === undefined) {
          observation.removed = consumer.pendingAcks.remove(ledger, entry);
        } else {
          observation.removed = consumer.pendingAcks.removeExact(ledger, entry, params.batch_size, params.hash);
          if (!observation.removed) this.events.add('kept_mismatch');
        }
        break;
      case 'remove_and_get_remaining_unacked':
        observation.removed = consumer.pendingAcks.removeAndGetRemainingUnacked(ledger, entry);
        break;
      case 'remove_all_up_to':
        if (new Set([...consumer.pendingAcks.acks.values()].map((v) => v.ledger)).size > 1) {
          this.events.add('across_ledgers');
        }
        consumer.pendingAcks.removeAllUpTo(ledger, entry, visit);
        observation.removed = removed;
        break;
      case 'for_each_and_clear':
        consumer.pendingAcks.forEachAndClear(visit);
        observation.removed = removed;
        break;
      case 'for_each_and_close':
        consumer.pendingAcks.forEachAndClose(visit);
        observation.removed = removed;
        break;
      case 'should_block_sticky_key_hash':
        observation.blocked = this.tracker.shouldBlockStickyKeyHash(consumer, params.hash);
        break;
      case 'move_hash':
        this.moveHash(params.hash, consumer);
        break;
      case 'start_batch':
        this.tracker.startBatch();
        break;
      case 'end_batch':
        this.tracker.endBatch();
        break;
      default:
        throw new Error(`unknown action ${action}`);
    }
    observation.unblocked = this.unblocked;
    return observation;
  }

  vars() {
    const draining = [...this.tracker.drainingHashes.entries()].sort((a, b) => a[0] - b[0])
      .map(([hash, e]) => [hash, e.consumer.id, e.refCount, e.blockedCount > 0]);
    return {
      consumers: this.consumers.map((c) => [c.id, c.name, c.pendingAcks.closed]),
      owners: [...this.owners.entries()].map(([hash, c]) => [hash, c.id]),
      pending: this.consumers.map((c) => [c.id, c.pendingAcks.sorted().map((v) => [v.ledger, v.entry, v.batchSize, v.hash])]),
      draining,
      batch_level: this.tracker.batchLevel,
      unblocked_while_batching: this.tracker.unblockedWhileBatching,
      replay: [...this.replay.values()].sort(comparePositions),
      events: [...this.events].sort(),
    };
  }
}

/** One message in, one line out. */
let scope;
let hello;
function answer(message) {
  switch (message.type) {
    case 'hello':
      if (message.protocol !== PROTOCOL) return {type: 'error', message: `this port speaks protocol ${PROTOCOL} only`};
      if (message.mechanism !== 'keyshared' || message.config.scope !== 'tracker') {
        return {type: 'error', message: 'this port implements the keyshared tracker scope only'};
      }
      hello = message;
      scope = new TrackerScope(message.config);
      return {type: 'ready', vars: scope.vars(), capabilities: ['reset', 'pipeline']};
    case 'reset': {
      const replay = scope.replay;
      scope = new TrackerScope(hello.config);
      if (bug === 'reset-leak') scope.replay = replay;
      return {type: 'ready', vars: scope.vars()};
    }
    case 'step':
      try {
        return {type: 'reply', seq: message.seq, observation: scope.apply(message.action, message.params), vars: scope.vars()};
      } catch (e) {
        return {type: 'error', seq: message.seq, message: String(e && e.stack || e)};
      }
    default:
      return {type: 'error', message: `unknown message type ${message.type}`};
  }
}

// Every complete line of a chunk is answered, and the answers written at once (pipelined steps arrive together).
let pending = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  pending += chunk;
  const lines = pending.split('\n');
  pending = lines.pop();
  const out = lines.filter((l) => l.length).map((l) => JSON.stringify(answer(JSON.parse(l)))).join('\n');
  if (out) process.stdout.write(out + '\n');
});
process.stdin.on('end', () => process.exit(0));
