"""The specification travels with the code: docs/spec/<mechanism>.md names exactly the properties the code
declares (`brokerspec invariants`), the catalogue's declarations agree with what the engines and the reference
adapters really judge, every page is linked, and nothing points outside the repository (to `../shared`)."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
from dataclasses import replace
from html import escape
from pathlib import Path

import pytest

from properties import registry
from properties.cli import main
from properties.cli.invariants import ENGINES, Entry, catalogue
from properties.cli.mutants import discover
from properties.cli.report import render
from properties.engines.checks import about
from properties.engines.mechanism import JUDGED_BY, Property
from traces.format import load

ROOT = Path(__file__).resolve().parents[1]
MECHANISMS = list(registry.mechanisms())
BESIDE = "shared"
"""The read-only folder beside the repository, which nothing in it may point to."""
OUTSIDE = re.compile(rf"(?<![\w.-])(?:\.\./)?{BESIDE}/")
"""A path into that folder, with or without `../` (but not `keyshared/`)."""


@functools.cache
def _catalogue(name: str) -> tuple[Entry, ...]:
    """The mechanism's catalogue, built once per process (its Z3 proofs take a few seconds for delayed)."""
    return tuple(catalogue(registry.get(name), discover()))


def _ids(text: str, prefixes: set[str]) -> set[str]:
    """The property IDs a text names, for the given ID prefixes (`PQ`, `KS`, ...): `KS-I5-hash`, `MD-I1-W`, `LK-6`."""
    pattern = rf"\b(?:{'|'.join(sorted(prefixes))})-[A-Za-z0-9]+(?:-[A-Za-z]+\b)?"
    return set(re.findall(pattern, text))


def doc_problems(entries: tuple[Entry, ...], doc: Path) -> list[str]:
    """What keeps `doc` from being the prose of `entries`: an ID the code has and the page lacks, or the reverse."""
    named = {entry.name for entry in entries}
    written = _ids(doc.read_text(encoding="utf-8"), {name.split("-")[0] for name in named})
    return ([f"{doc.name}: {name} is in the code but not in the spec" for name in sorted(named - written)]
            + [f"{doc.name}: {name} is in the spec but not in the code" for name in sorted(written - named)])


def _spec(name: str) -> Path:
    return ROOT / "docs" / "spec" / f"{name}.md"


@pytest.mark.parametrize("name", MECHANISMS)
def test_every_property_of_the_code_is_in_its_spec_and_back(name: str) -> None:
    assert doc_problems(_catalogue(name), _spec(name)) == []


def test_a_property_added_without_its_doc_entry_or_removed_from_the_code_is_reported() -> None:
    entries = _catalogue("pidquota")
    fake = Entry("pidquota", "PQ-I99", "invariant", (("pidquota", "a new invariant nobody documented"),),
                 (("explorer", ("small",)),), ())
    assert doc_problems((*entries, fake), _spec("pidquota")) == [
        "pidquota.md: PQ-I99 is in the code but not in the spec"]
    binding = registry.get("pidquota")
    grown = replace(binding, beyond_model={**binding.beyond_model, "PQ-I98": Property("undocumented", ("tests",))})
    assert doc_problems(tuple(catalogue(grown)), _spec("pidquota")) == [
        "pidquota.md: PQ-I98 is in the code but not in the spec"]
    dropped = tuple(entry for entry in entries if entry.name != "PQ-I11")
    assert doc_problems(dropped, _spec("pidquota")) == ["pidquota.md: PQ-I11 is in the spec but not in the code"]


@pytest.mark.parametrize("name", MECHANISMS)
def test_the_catalogue_declarations_agree_with_the_code(name: str) -> None:
    mechanism = registry.get(name)
    entries = {entry.name: entry for entry in _catalogue(name)}
    stated = {entry.name for entry in entries.values() if entry.kind != "beyond the model"}
    on_reference = {n for names in mechanism.reference_judges.values() for n in names}
    scopes = {mechanism.scope(c) for c in (*mechanism.explore_configs.values(), *mechanism.hypothesis_configs.values())}
    assert set(mechanism.reference_judges) <= scopes - set(mechanism.model_only)
    assert not stated & set(mechanism.beyond_model), "a property has two statements: the model's and the binding's"
    for prop_name, prop in mechanism.beyond_model.items():
        assert prop.statement and prop.judged_by and set(prop.judged_by) <= set(JUDGED_BY), prop_name
        assert ("reference" in prop.judged_by) == (prop_name in on_reference), prop_name
        if "z3" in prop.judged_by:
            assert "z3" in dict(entries[prop_name].judged), f"{prop_name}: no Z3 proof states it"
    for entry in entries.values():
        assert all(text for _, text in entry.statements), f"{entry.name} has no statement"
        assert entry.judged and {engine for engine, _ in entry.judged} <= set(ENGINES), entry.name
    for mutant in discover(mechanisms=[name]):
        assert mutant.kills in on_reference, f"{mutant.name}: a planted bug of the reference dies by an oracle"
    assert set(mechanism.twins.values()) <= stated, "a twin is caught on an invariant the model states"


@pytest.mark.parametrize("name", MECHANISMS)
def test_reference_judges_are_what_the_adapters_report(name: str) -> None:
    """`reference_judges` lists exactly the IDs written in the classes of the binding that define `violations`."""
    mechanism = registry.get(name)
    written: set[str] = set()
    for path in sorted((ROOT / "properties" / name).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(f, ast.FunctionDef) and f.name == "violations" for f in node.body):
                written |= {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            and re.fullmatch(r"[A-Z]{2}-[A-Za-z0-9]+(-[A-Za-z]+)?", c.value)}
    assert written == {n for names in mechanism.reference_judges.values() for n in names}


def test_no_tracked_file_points_outside_the_repository() -> None:
    assert OUTSIDE.search(f"see ../{BESIDE}/spec/pid_quota.md") and OUTSIDE.search(f"`{BESIDE}/DESIGN.md`")
    assert not OUTSIDE.search("properties/keyshared/binding.py and reference_impl/keyshared/")
    files = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert len(files) > 100
    pointing = [f"{f}:{i}" for f in files for i, line in enumerate(
        (ROOT / f).read_text(encoding="utf-8").splitlines(), start=1) if OUTSIDE.search(line)]
    assert pointing == []


@pytest.mark.parametrize("name", MECHANISMS)
def test_each_spec_is_linked_from_the_readme_the_port_guide_and_the_binding(name: str) -> None:
    assert _spec(name).is_file()
    assert registry.get(name).spec == f"docs/spec/{name}.md"
    row = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith(f"| `{name}` |"))
    assert f"(docs/spec/{name}.md)" in row
    assert f"(spec/{name}.md)" in (ROOT / "docs" / "ports.md").read_text(encoding="utf-8")


def test_invariants_prints_each_property_with_its_statement_engines_and_twins(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["invariants", "--mechanism", "pidquota"]) == 0
    out = capsys.readouterr().out
    for entry in _catalogue("pidquota"):
        assert f"{entry.name}  [{entry.kind}]  {entry.statements[0][1]}" in out
    paragraph = out.split("\nPQ-I1  ", 1)[1].split("\n\n", 1)[0]
    assert "explorer: horizon, murmur, small, two_principals, three_layers" in paragraph
    assert "z3: PidCache[current]" in paragraph
    assert "broken by  twin no_readd; z3 twin PidCache[no_readd]" in paragraph
    assert "broken by  mutant pidquota-contains-on-union" in out.split("\nPQ-I11  ", 1)[1]


def test_invariants_json_is_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["invariants", "--mechanism", "pidquota", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in document["invariants"]] == [entry.name for entry in _catalogue("pidquota")]
    pq6 = next(row for row in document["invariants"] if row["id"] == "PQ-I6")
    assert pq6["broken_by"] == ["mutant pidquota-charge-every-pid"] and "conformance (reference)" in pq6["judged_by"]
    assert main(["invariants", "--mechanism", "nope"]) == 3


def test_a_reference_only_violation_is_explained_in_the_report_with_the_catalogue_statement() -> None:
    trace = load(ROOT / "traces" / "corpus" / "pidquota" / "no_readd-explorer-PQ-I1.json")
    failing = next(i for i, step in enumerate(trace.steps) if step.violations)
    steps = list(trace.steps)
    steps[failing] = replace(steps[failing], violations=("PQ-I1", "PQ-I6"))
    box = render(replace(trace, steps=tuple(steps))).split('<div class="failure">', 1)[1].split("</div>", 1)[0]
    mechanism = registry.get("pidquota")
    for name in ("PQ-I1", "PQ-I6"):
        statement = mechanism.statement(name)
        assert statement and escape(statement) in box, name


def test_a_failing_check_row_ends_with_the_statement() -> None:
    mechanism = registry.get("topiclist")
    flows = mechanism.explore_configs["flows"]
    assert about(mechanism, flows, "TL-I7") == (
        "; TL-I7: no permit leak at quiescence: heap and direct acquired == 0 and the lookup semaphore back at its max")
    assert about(mechanism, flows, "TL-I9").startswith("; TL-I9: metrics agree with state")  # the semaphore model's
    assert about(mechanism, flows, "divergence") == ""
    assert about(mechanism, flows, "TL-I7", mechanism.statement("TL-I7", flows)) == ""
