"""The one typed configuration reader (`models.core.ConfigReader`) and action-parameter reader (`int_param`) that
every model reads through: a value of the wrong type or below its least is refused, naming the mechanism and the key."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from models.core import Action, ActionNotEnabled, ConfigError, ConfigReader, Param, int_param
from properties import registry

CONFIG: dict[str, Param] = {"n": 3, "flag": True, "name": "a", "ns": (2, 0, 2), "names": ("x", "y")}
READ = ConfigReader("demo", CONFIG)


def test_well_typed_values_are_read_as_they_are() -> None:
    assert READ.integer("n", least=3) == 3
    assert READ.flag("flag") is True
    assert READ.string("name") == "a"
    assert READ.integers("ns", least=0) == (2, 0, 2)
    assert READ.strings("names", nonempty=True, distinct=True) == ("x", "y")


def test_a_default_stands_in_only_for_an_absent_key() -> None:
    assert READ.integer("absent", default=7) == 7
    assert READ.integer("n", default=7) == 3
    assert READ.flag("absent", default=False) is False
    assert READ.strings("absent", default=("z",)) == ("z",)
    with pytest.raises(KeyError):
        READ.integer("absent")


@pytest.mark.parametrize(
    ("value", "read", "expected"),
    [
        (0, lambda r: r.integer("k", least=1), "an int >= 1"),
        (True, lambda r: r.integer("k"), "an int"),
        ("4", lambda r: r.integer("k"), "an int"),
        (1, lambda r: r.flag("k"), "a bool"),
        (1, lambda r: r.string("k"), "a string"),
        ((1, True), lambda r: r.integers("k"), "a tuple of ints"),
        ((1, -1), lambda r: r.integers("k", least=0), "a tuple of ints >= 0"),
        ((), lambda r: r.integers("k", nonempty=True), "a non-empty tuple of ints"),
        ((1, 1), lambda r: r.integers("k", distinct=True), "a tuple of distinct ints"),
        (3, lambda r: r.integers("k"), "a tuple of ints"),
        (("a", 1), lambda r: r.strings("k"), "a tuple of strings"),
        ((), lambda r: r.strings("k", nonempty=True, distinct=True), "a non-empty tuple of distinct strings"),
    ],
)
def test_a_value_of_the_wrong_type_or_below_its_least_is_refused_naming_the_key(
    value: Param, read: Callable[[ConfigReader], object], expected: str
) -> None:
    message = f"demo config 'k' must be {expected}, got {value!r}"
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        read(ConfigReader("demo", {"k": value}))


@pytest.mark.parametrize(
    ("mechanism", "override", "key"),
    [
        ("delayed", {"tick": 0}, "tick"),
        ("pidquota", {"pids": (1, True)}, "pids"),
        ("metadata", {"workers": "2"}, "workers"),
        ("keyshared", {"names": ("a", 1)}, "names"),
        ("keyshared", {"scope": "tracker", "consumers": True}, "consumers"),
    ],
)
def test_every_model_refuses_a_mistyped_value_through_the_reader(
    mechanism: str, override: dict[str, Param], key: str
) -> None:
    with pytest.raises(ConfigError, match=f"^{mechanism}( tracker)? config {key!r} must be "):
        registry.get(mechanism).make_model(override, registry.get(mechanism).current)


def test_an_action_parameter_is_an_int_or_the_action_is_not_enabled() -> None:
    assert int_param(Action.of("ack", consumer=2), "consumer") == 2
    for action in (Action.of("ack", consumer=True), Action.of("ack", consumer="2"), Action.of("ack")):
        with pytest.raises(ActionNotEnabled, match="parameter 'consumer' must be an int"):
            int_param(action, "consumer")
