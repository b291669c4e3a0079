"""Spec §9: Pulsar settings map onto the reference parameters."""

from __future__ import annotations

import pytest

from reference_impl.delayed import (
    PULSAR_DEFAULTS,
    InMemoryDelayedDeliveryTracker,
    InMemoryDelayedDeliveryTrackerFactory,
    LegacyDelayedDeliveryTracker,
    VirtualTimer,
)
from tests.delayed.support import ManualClock


def test_pulsar_defaults() -> None:
    factory = InMemoryDelayedDeliveryTrackerFactory()
    assert factory.tick_time_millis == 1000
    assert factory.strict is False
    assert factory.fixed_delay_detection_lookahead == 50000
    assert factory.max_entries_per_ledger == 50000
    tracker = factory.new_tracker(ManualClock())
    assert isinstance(tracker, InMemoryDelayedDeliveryTracker)
    assert tracker.variant == "current"
    assert (tracker.tick_time_millis, tracker.precision_bits, tracker.precision_millis) == (1000, 9, 512)
    assert (tracker.strict, tracker.fixed_delay_detection_lookahead) == (False, 50000)
    assert set(PULSAR_DEFAULTS) == {
        "delayedDeliveryEnabled",
        "delayedDeliveryTrackerFactoryClassName",
        "delayedDeliveryTickTimeMillis",
        "isDelayedDeliveryDeliverAtTimeStrict",
        "delayedDeliveryFixedDelayDetectionLookahead",
        "managedLedgerMaxEntriesPerLedger",
    }


def test_settings_map_to_parameters_and_kinds() -> None:
    factory = InMemoryDelayedDeliveryTrackerFactory(
        {
            "delayedDeliveryTickTimeMillis": 100,
            "isDelayedDeliveryDeliverAtTimeStrict": True,
            "delayedDeliveryFixedDelayDetectionLookahead": 0,
            "delayedDeliveryTrackerFactoryClassName": "InMemoryDelayedDeliveryTrackerFactory",
            "managedLedgerMaxEntriesPerLedger": 7,
            "brokerServicePort": 6650,  # unrelated broker settings are ignored
        }
    )
    clock = ManualClock(10)
    timer = VirtualTimer(clock)
    buggy = factory.new_tracker(clock, "pr23611", timer=timer)
    assert isinstance(buggy, InMemoryDelayedDeliveryTracker)
    assert (buggy.variant, buggy.tick_time_millis, buggy.strict) == ("pr23611", 100, True)
    assert buggy.timer is timer
    assert buggy.should_pause_all_deliveries() is False  # lookahead 0 disables the pause
    legacy = factory.new_tracker(clock, "legacy")
    assert isinstance(legacy, LegacyDelayedDeliveryTracker)
    assert (legacy.tick_time_millis, legacy.strict, legacy.fixed_delay_detection_lookahead) == (100, True, 0)
    assert factory.max_entries_per_ledger == 7
    # Strict T=100 behaves as E4: @11 is held at now 10.
    assert buggy.add_message(1, 1, 11) is True


def test_string_values_from_broker_conf() -> None:
    factory = InMemoryDelayedDeliveryTrackerFactory(
        {"delayedDeliveryTickTimeMillis": " 500 ", "isDelayedDeliveryDeliverAtTimeStrict": "TRUE"}
    )
    assert (factory.tick_time_millis, factory.strict) == (500, True)
    tracker = factory.new_tracker(ManualClock())
    assert isinstance(tracker, InMemoryDelayedDeliveryTracker)
    assert tracker.precision_millis == 256


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"delayedDeliveryTickTimeMillis": 0}, "delayedDeliveryTickTimeMillis"),
        ({"delayedDeliveryTickTimeMillis": True}, "delayedDeliveryTickTimeMillis"),
        ({"delayedDeliveryTickTimeMillis": "1s"}, "delayedDeliveryTickTimeMillis"),
        ({"isDelayedDeliveryDeliverAtTimeStrict": "yes"}, "isDelayedDeliveryDeliverAtTimeStrict"),
        ({"delayedDeliveryFixedDelayDetectionLookahead": -1}, "delayedDeliveryFixedDelayDetectionLookahead"),
        ({"managedLedgerMaxEntriesPerLedger": 0}, "managedLedgerMaxEntriesPerLedger"),
        ({"delayedDeliveryEnabled": False}, "delayedDeliveryEnabled"),
        (
            {
                "delayedDeliveryTrackerFactoryClassName": (
                    "org.apache.pulsar.broker.delayed.BucketDelayedDeliveryTrackerFactory"
                )
            },
            "not modelled",
        ),
    ],
)
def test_bad_settings_name_the_setting(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InMemoryDelayedDeliveryTrackerFactory(settings)


def test_unknown_variant_is_rejected_by_the_tracker() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        InMemoryDelayedDeliveryTrackerFactory().new_tracker(ManualClock(), "pr26012")  # type: ignore[arg-type]
