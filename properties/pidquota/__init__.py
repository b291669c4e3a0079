"""The pidquota mechanism's binding: its configurations, reference adapter and Z3 proofs."""
