"""The engines: each works on the `models.core` protocol and a `Mechanism`, never on a mechanism by name."""
