"""The Key_Shared event log without Spark: the client-record fast path says what the full model says, the
log reads back as model actions, and simulation is deterministic whatever the number of workers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from models.keyshared import sticky_hash
from properties.engines.lockstep import DIVERGENCE
from properties.keyshared.eventlog import simulate as keyshared_sim
from properties.keyshared.eventlog.check import replay_batches
from properties.keyshared.eventlog.records import Record, client_verdict, full_verdict, partition
from properties.keyshared.eventlog.simulate import partition_records, to_table, walk
from properties.pipeline.simulate import simulate


@pytest.mark.parametrize("fault", ["classic", "pip282"])
def test_fast_path_finds_what_the_full_model_of_the_faulty_variant_finds(fault: str) -> None:
    for subscription in range(12):
        records = partition_records(subscription, 40, 1, fault)
        fast = client_verdict(records)
        full = full_verdict(partition(records), fault)
        assert fast.step is not None
        assert (fast.step, fast.failures) == (full.step, full.failures)


def test_fast_path_and_full_model_pass_clean_subscriptions() -> None:
    for subscription in range(40):
        records = walk("pip379", subscription, 300, random.Random(subscription))
        assert client_verdict(records).step is None
        assert full_verdict(partition(records), "pip379").step is None


def test_a_second_consumer_dispatch_breaks_ks_i1_where_the_model_diverges() -> None:
    for subscription in range(12):
        records = partition_records(subscription, 40, 1, "second_consumer")
        fast = client_verdict(records)
        full = full_verdict(partition(records), "pip379")
        assert fast.failures == ("KS-I1",) and full.failures == (DIVERGENCE,) and fast.step == full.step


def _log(*rows: tuple[str, int | None, int | None, str | None]) -> list[Record]:
    """Records from (event, consumer, position, key); hashes from the keys published so far."""
    keys: list[str] = []
    out: list[Record] = []
    for seq, (event, consumer, position, key) in enumerate(rows):
        if event == "publish":
            assert key is not None
            keys.append(key)
        h = sticky_hash(keys[position], 65535) if position is not None else None
        out.append((0, seq, event, consumer, position, h, key, "consumer1" if event == "add" else None,
                    1 if event == "add" else None))
    return out


def test_fast_path_sees_a_skipped_message_and_an_ack_of_what_is_not_held() -> None:
    skipped = _log(("add", 7, None, None), ("publish", None, 0, "k"), ("publish", None, 1, "k"),
                   ("read", None, None, None), ("dispatch", 7, 1, None))
    assert client_verdict(skipped).failures == ("KS-I4",) and client_verdict(skipped).step == 4
    foreign = _log(("add", 7, None, None), ("publish", None, 0, "k"), ("ack", 7, 0, None))
    assert client_verdict(foreign).failures == (DIVERGENCE,) and client_verdict(foreign).seq == 2


def test_the_arrow_replay_carries_subscriptions_across_batches_and_reports_unreadable_records() -> None:
    good = walk("pip379", 1, 50, random.Random(1))
    unknown_consumer = [(2, *r[1:]) for r in _log(("add", 7, None, None), ("publish", None, 0, "k"),
                                                  ("read", None, None, None), ("dispatch", 8, 0, None))]
    batches = to_table(good + unknown_consumer).to_batches(max_chunksize=7)  # every batch cuts a subscription
    rows = [row for verdicts in replay_batches(iter(batches)) for row in verdicts.to_pylist()]
    assert [(r["key"], r["events"], r["step"]) for r in rows] == [(1, 50, None), (2, 4, 3)]
    assert rows[1]["failures"] == DIVERGENCE and rows[1]["seq"] == 3
    assert rows[1]["divergence"].startswith("not replayable through the model: seq 3")


def test_consumer_ids_become_the_models_lowest_free_ids() -> None:
    log = _log(("add", 7, None, None), ("add", 9, None, None), ("remove", 7, None, None), ("add", 12, None, None),
               ("publish", None, 0, "k"), ("read", None, None, None), ("dispatch", 12, 0, None))
    part = partition(log)
    assert [a.get("consumer") for a in part.actions] == [1, 2, 1, 1, None, None]
    assert part.delivered[-1] == ((1, 0),) and part.seqs == (0, 1, 2, 3, 4, 5)
    assert part.config["max_messages"] == 1 and part.config["keys"] == ("k",)


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_same_seed_same_bytes(tmp_path: Path, suffix: str) -> None:
    paths = [tmp_path / f"{name}{suffix}" for name in ("a", "b", "c")]
    for path, seed in zip(paths, (5, 5, 6), strict=True):
        simulate("keyshared", 3000, path, partitions=60, fault="classic", faulted=(4,), seed=seed)
    assert paths[0].read_bytes() == paths[1].read_bytes() != paths[2].read_bytes()


def test_worker_processes_write_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    simulate("keyshared", 4000, tmp_path / "one.parquet", partitions=800, seed=3)
    monkeypatch.setattr(keyshared_sim, "_POOL_THRESHOLD", 0)  # 800 subscriptions: four chunks over the workers
    simulate("keyshared", 4000, tmp_path / "pool.parquet", partitions=800, seed=3)
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "pool.parquet").read_bytes()
