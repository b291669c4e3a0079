"""Every integer a configuration holds has a declared bound (`Mechanism.limits`), checked before anything is built.

A key read as an integer (or a list of them) without a bound is one a trace could set to 10**18, and a model
that expands it (`pending: 10**18` once made every trace command raise `MemoryError`) would run out of memory
before any check; so the keys every configuration's models read as integers, and every key whose value holds
an integer, must have a bound, and every configuration the checks use must be within its bounds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from models.core import ConfigReader, Param
from properties import registry
from properties.cli import USAGE, main
from properties.cli.promote import CORPUS
from properties.engines.mechanism import Mechanism
from traces.limits import config_problem, length_key

MECHANISMS = list(registry.mechanisms().values())


def _configurations(mechanism: Mechanism) -> Iterator[tuple[str, Mapping[str, Param]]]:
    for configs in (mechanism.explore_configs, mechanism.nightly_configs, mechanism.hypothesis_configs):
        yield from configs.items()


def _holds_an_int(value: Param) -> bool:
    if isinstance(value, bool | str):
        return False
    if isinstance(value, int):
        return True
    return any(_holds_an_int(item) for item in value)


def _integer_keys(mechanism: Mechanism, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Each key a model or reference of the mechanism reads as an integer, or whose value holds one, with the
    configuration that shows it."""
    found: dict[str, str] = {}
    where = [""]
    integer, integers = ConfigReader.integer, ConfigReader.integers

    def read_integer(self: ConfigReader, key: str, **kwargs: Any) -> int:
        found.setdefault(key, where[0])
        return integer(self, key, **kwargs)

    def read_integers(self: ConfigReader, key: str, **kwargs: Any) -> tuple[int, ...]:
        found.setdefault(key, where[0])
        return integers(self, key, **kwargs)

    monkeypatch.setattr(ConfigReader, "integer", read_integer)
    monkeypatch.setattr(ConfigReader, "integers", read_integers)
    for name, config in _configurations(mechanism):
        where[0] = name
        for variant in mechanism.variants:
            model = mechanism.make_model(config, variant)
            found.update({k: name for k, v in model.config.items() if _holds_an_int(v) and k not in found})
        make_reference = mechanism.for_config(config).make_reference
        if make_reference is not None:
            make_reference(config, mechanism.current).close()
    return found


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_every_integer_key_has_a_bound(mechanism: Mechanism, monkeypatch: pytest.MonkeyPatch) -> None:
    unbounded = {k: config for k, config in _integer_keys(mechanism, monkeypatch).items() if k not in mechanism.limits}
    assert unbounded == {}, f"integer keys without a bound in {mechanism.name}'s limits (key: a configuration)"


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=[m.name for m in MECHANISMS])
def test_every_configuration_is_within_its_bounds_and_every_bound_names_a_key(
    mechanism: Mechanism, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = set(_integer_keys(mechanism, monkeypatch))
    for name, config in _configurations(mechanism):
        model = mechanism.make_model(config, mechanism.current)
        assert config_problem(model.config, mechanism.limits) is None, name
        keys |= {length_key(k) for k, v in model.config.items() if isinstance(v, tuple)}
    assert sorted(set(mechanism.limits) - keys) == []  # a bound of a key no configuration has is a typo


def test_a_bound_applies_to_every_integer_inside_a_list_and_a_length_bound_to_its_items() -> None:
    bounds = {"ids": (1, 3), "len(ids)": (1, 2)}
    assert config_problem({"ids": ((1, 2), (3,))}, bounds) is None
    assert config_problem({"ids": ((1, 2), (4,))}, bounds) == "config.ids[1][0]: 4 is out of bounds (1 to 3)"
    assert config_problem({"ids": (1, 2, 3)}, bounds) == "config.ids: 3 items is out of bounds (1 to 2 items)"
    assert config_problem({"other": 10**18}, bounds) is None  # within 64 bits, and no bound of its own
    assert config_problem({"other": 2**63}, bounds) == "config.other: 9223372036854775808 does not fit in 64 bits"


TRACE = str(sorted(CORPUS.glob("keyshared/*.json"))[0])
TIMED = {
    "replay": ["replay", TRACE, "--port", "true"],
    "shrink": ["shrink", TRACE, "--port", "true"],
    "verify": ["verify", "--mechanism", "keyshared", "--port", "true"],
}


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e300", "0"])
@pytest.mark.parametrize(("command", "option"), [("replay", "--step-timeout"), ("shrink", "--step-timeout"),
                                                 ("shrink", "--budget"), ("verify", "--step-timeout"),
                                                 ("verify", "--budget")])
def test_a_wait_or_budget_out_of_range_is_a_usage_error(command: str, option: str, value: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A timeout of `inf` once reached `select` and raised OverflowError; each is refused by the parser."""
    argv = TIMED[command]
    at = argv.index("--port")
    if value == "0" and option == "--budget":
        value = "-0.5"  # a zero budget is allowed: nothing is run and the verdict says so
    code = main([*argv[:at], option, value, *argv[at:]])
    err = capsys.readouterr().err
    assert code == USAGE and err.startswith(f"error: brokerspec {command}: argument {option}: "), err
    assert len(err.strip().splitlines()) == 1, err
