"""A trace is data: `promote` never lets its text run as code nor write outside the folders it is given."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from models.core import Action
from properties.cli import PASS, USAGE, main
from properties.cli.promote import promote
from properties.engines.replay import record
from tests.engines.tiny import CounterModel
from traces import format as tf

INJECTED = '"""\nimport os\nos.system("touch PWNED")\n"""'


def _trace(tmp_path: Path) -> Path:
    trace = record(CounterModel({"limit": 3}, "overflow"), [Action.of("add", n=2)] * 2, engine="test")
    return tf.save(trace, tmp_path / "found.json")


def _tampered(tmp_path: Path, where: str, value: str) -> Path:
    path = _trace(tmp_path)
    doc = json.loads(path.read_text())
    info = doc["#meta"]["brokerspec"]
    if where == "names":
        info["failure"]["names"] = [value]
    else:
        info[where] = value
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.usefixtures("tiny_registered")
@pytest.mark.parametrize("where", ["engine", "variant", "mechanism", "names"])
@pytest.mark.parametrize("value", [INJECTED, "a'b", "x\ny", "../../../../tmp/x", "/etc/passwd"])
def test_text_from_a_trace_is_refused_before_it_reaches_a_file(tmp_path: Path, where: str, value: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _tampered(tmp_path, where, value)
    code = main(["promote", str(path), "--tests-dir", str(tmp_path / "tests"), "--corpus", str(tmp_path / "corpus")])
    assert code == USAGE
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert not (tmp_path / "tests").exists() and not (tmp_path / "corpus").exists()
    assert not list(Path.cwd().glob("PWNED")) and not Path("/tmp/x").exists()


@pytest.mark.usefixtures("tiny_registered")
@pytest.mark.parametrize("name", ["../../escape", "/abs/olute", "a\nb", "'; import os; '"])
def test_a_name_is_reduced_to_letters_digits_and_underscores(tmp_path: Path, name: str) -> None:
    test_path, saved = promote(_trace(tmp_path), tmp_path / "tests", name, corpus_root=tmp_path / "corpus")
    assert test_path.parent == (tmp_path / "tests").resolve()
    assert saved.parent == (tmp_path / "corpus" / "tiny").resolve()
    tree = ast.parse(test_path.read_text())
    functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    assert len(functions) == 1 and functions[0].removeprefix("test_").replace("_", "").isalnum()


@pytest.mark.usefixtures("tiny_registered")
@pytest.mark.parametrize("inside", [True, False])
def test_promote_works_for_a_tests_folder_anywhere_and_the_test_runs(tmp_path: Path, inside: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    monkeypatch.chdir(repo if inside else tmp_path)
    tests_dir = Path("tests/regressions") if inside else (tmp_path / "elsewhere" / "t")
    assert main(["promote", str(_trace(tmp_path)), "--tests-dir", str(tests_dir),
                 "--corpus", str(repo / "traces" / "corpus")]) == PASS
    [test_path] = list((repo / tests_dir if inside else tests_dir).glob("test_*.py"))
    namespace: dict[str, object] = {"__file__": str(test_path.resolve())}
    exec(compile(test_path.read_text(), str(test_path), "exec"), namespace)
    namespace["test_found"]()  # type: ignore[operator]


@pytest.mark.usefixtures("tiny_registered")
def test_an_existing_test_is_not_overwritten_without_force(tmp_path: Path) -> None:
    source = _trace(tmp_path)
    promote(source, tmp_path / "tests", corpus_root=tmp_path / "corpus")
    with pytest.raises(tf.TraceError, match="exists"):
        promote(source, tmp_path / "tests", corpus_root=tmp_path / "corpus")
    promote(source, tmp_path / "tests", corpus_root=tmp_path / "corpus", force=True)
