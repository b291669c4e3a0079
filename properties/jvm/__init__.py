"""The JVM controller's Python side: build the Java agent (`jvm/`), drive its lock-level protocol, explore schedules.

`build` compiles `jvm/src` with the distribution's ASM (Debian's `libasm-java`) into a cached agent jar;
`threads` starts a JVM with the agent and speaks the lock-level protocol (docs/ports.md, "Lock-level ports") to
a scenario; `explore` runs a scenario's interleavings, stateless, under a preemption bound.
"""
