"""The choice between the compiled and the pure-Python hot path (pynatsd.native)."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pynatsd import native

_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def fake_package(tmp_path: Path, built: bool = True) -> Path:
    """A package directory holding the compiled modules' sources and, if `built`, a fake
    extension for each and the manifest of their hashes."""
    for module in native.COMPILED_MODULES:
        source = Path(native.source_path(module, str(tmp_path)))
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(f"# {module}\n")
        if built:
            source.with_suffix("").with_name(source.stem + _SUFFIX).write_bytes(b"")
    if built:
        hashes = {m: native.source_hash(m, str(tmp_path)) for m in native.COMPILED_MODULES}
        manifest = {"compiler": "mypyc 9.9", "sources": hashes}
        (tmp_path / native.MANIFEST).write_text(json.dumps(manifest))
    return tmp_path


def test_a_fresh_build_is_compiled(tmp_path: Path) -> None:
    selection = native.decide(str(fake_package(tmp_path)), {})
    assert selection == native.Selection(True, "compiled (mypyc 9.9)")


@pytest.mark.parametrize("value", ["1", "yes"])
def test_the_environment_variable_forces_pure_python(tmp_path: Path, value: str) -> None:
    selection = native.decide(str(fake_package(tmp_path)), {native.PURE_ENV: value})
    assert selection == native.Selection(False, "pure Python (PYNATSD_PURE_PYTHON=1)")
    assert native.decide(str(tmp_path), {native.PURE_ENV: "0"}).compiled


def test_no_build_is_pure_python(tmp_path: Path) -> None:
    selection = native.decide(str(fake_package(tmp_path, built=False)), {})
    assert selection == native.Selection(False, "pure Python (not compiled: no build found)")


def test_a_missing_extension_is_pure_python(tmp_path: Path) -> None:
    fake_package(tmp_path)
    source = Path(native.source_path("pynatsd.sublist", str(tmp_path)))
    source.with_name(source.stem + _SUFFIX).unlink()
    assert not native.decide(str(tmp_path), {}).compiled


def test_changed_source_never_runs_its_old_extension(tmp_path: Path) -> None:
    fake_package(tmp_path)
    source = Path(native.source_path("pynatsd.sublist", str(tmp_path)))
    source.write_text(source.read_text() + "# edited\n")
    with pytest.warns(native.StaleBuildWarning, match=r"pynatsd\.sublist changed.*Rebuild"):
        selection = native.decide(str(tmp_path), {})
    assert selection == native.Selection(
        False, "pure Python (compiled build is stale: pynatsd.sublist)"
    )


def test_this_process_runs_the_path_it_reports() -> None:
    import pynatsd.jetstream.consumer.ack_subjects
    import pynatsd.jetstream.consumer.pullrun
    import pynatsd.jetstream.store.records
    import pynatsd.protocol.frames
    import pynatsd.protocol.parser
    import pynatsd.protocol.runs
    import pynatsd.server.outbound
    import pynatsd.server.plans
    import pynatsd.server.subscribe
    import pynatsd.subjects
    import pynatsd.sublist

    modules = [
        pynatsd.protocol.parser,
        pynatsd.protocol.runs,
        pynatsd.protocol.frames,
        pynatsd.sublist,
        pynatsd.subjects,
        pynatsd.server.outbound,
        pynatsd.server.plans,
        pynatsd.server.subscribe,
        pynatsd.jetstream.consumer.ack_subjects,
        pynatsd.jetstream.consumer.pullrun,
        pynatsd.jetstream.store.records,
    ]
    assert {m.__name__ for m in modules} == set(native.COMPILED_MODULES)
    compiled = native.select().compiled
    assert [native.is_compiled(m) for m in modules] == [compiled] * len(modules)


def test_pure_python_is_selected_in_a_new_process() -> None:
    code = (
        "import pynatsd.sublist, pynatsd.protocol.parser as p\n"
        "from pynatsd import native\n"
        "print(native.describe(), native.is_compiled(p), native.is_compiled(pynatsd.sublist))"
    )
    env = {**os.environ, native.PURE_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split("\n")[0] == "pure Python (PYNATSD_PURE_PYTHON=1) False False"


def test_a_package_imported_from_a_zip_runs_its_source(tmp_path: Path) -> None:
    """As Spark ships it to executors (docs/spark.md): Python's zip importer loads no extension
    module, so every compiled module comes from its source in the zip."""
    import zipfile

    package = Path(native.__file__).parent
    archive = tmp_path / "pynatsd.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in package.rglob("*"):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, str(file.relative_to(package.parent)))
    code = (
        "import pynatsd.spark, pynatsd.subjects as s\n"
        "from pynatsd import native\n"
        "print(native.describe(), s.__file__.endswith('pynatsd.zip/pynatsd/subjects.py'))"
    )
    env = {k: v for k, v in os.environ.items() if k != native.PURE_ENV}
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(archive)!r})\n{code}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split("\n")[0] == "pure Python (not compiled: no build found) True"
