"""java.util.concurrent on one deterministic scheduler, for every mechanism's reference.

`executors` holds the harness-stepped `World` (threads, timers, futures, the virtual clock), `locks` the
reentrant and read/write locks, `atomic` the atomics and volatile fields. In a preemptive world every
lock acquisition and atomic access is a scheduling point, so a reference written statement by statement
after upstream's Java runs at upstream's lock granularity, one harness-chosen step at a time.
"""
