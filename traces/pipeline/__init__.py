"""The Spark pipeline: simulate large event logs from the models and check them at scale.

`schema` fixes the event-log layout per mechanism, `simulate` writes logs (with known-bad variants
injected into chosen partitions), `check` reads a log with Spark, quarantines malformed records and
checks every partition with SQL window queries and an Arrow-batched model replay.
"""
