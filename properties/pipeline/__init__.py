"""The Spark pipeline: simulate large event logs from the models and check them at scale.

`schema` fixes the event-log layout per mechanism, `simulate` writes logs (with known-bad variants
injected into chosen partitions), `ingest` reads a log with Spark and types every record or
quarantines it (with its file, line and reason; duplicates too), `check` checks every partition
with SQL window queries and an Arrow-batched model replay, `explore` spreads random walks over Spark
tasks, and `bench` measures it all. Key_Shared's broker event log has its own
modules: `keyshared_log` (the records, the model actions they stand for, the client-record fast
path), `keyshared_sim` (the reference dispatcher under a random workload) and `keyshared_check` (its
quarantine rules, SQL checks, `mapInArrow` replay and traces).
"""
