"""Which path runs the hot modules: compiled by mypyc, or pure Python (docs/performance.md).

nats-server has no counterpart: Go is always compiled. Here the modules in `COMPILED_MODULES`
are plain Python source that `setup.py` also compiles with mypyc into extension modules beside
them, and it records each source's SHA-256 in `native.json`. `select()` runs once, when `pynatsd`
is imported, and decides for the whole process:

- `PYNATSD_PURE_PYTHON=1` (any value but empty or 0): pure Python, by choice;
- no `native.json` (never built, or built without a compiler): pure Python;
- a source whose hash differs from the build's (edited since): pure Python, with a
  `StaleBuildWarning` naming it, so an old extension never runs in place of changed source;
- otherwise: compiled.

The pure path is taken by a finder placed before the standard ones that loads these modules from
their `.py` files; the compiled path needs nothing, since Python prefers an extension module to
source of the same name. All modules go one way together: mypyc compiles them as one group.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType

COMPILED_MODULES = (
    "pynatsd.protocol.parser",
    "pynatsd.protocol.runs",
    "pynatsd.protocol.frames",
    "pynatsd.sublist",
    "pynatsd.subjects",
    "pynatsd.server.outbound",
    "pynatsd.server.plans",
    "pynatsd.server.subscribe",
    "pynatsd.jetstream.consumer.pullrun",
    "pynatsd.jetstream.store.records",
    "pynatsd.jetstream.consumer.ack_subjects",
)
"""The modules setup.py compiles (it reads this tuple); each must also work as plain Python."""

PURE_ENV = "PYNATSD_PURE_PYTHON"
MANIFEST = "native.json"
"""Written by setup.py beside this module: {"compiler": ..., "sources": {module: sha256}}."""
REBUILD = "pip install -e . (or: python setup.py build_ext --inplace)"

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class StaleBuildWarning(RuntimeWarning):
    """Compiled modules exist but their source changed since; the pure path runs instead."""


@dataclass(frozen=True, slots=True)
class Selection:
    compiled: bool
    reason: str  # why, in a few words, for --version and the test header


def source_path(module: str, package_dir: str = _PACKAGE_DIR) -> str:
    """The `.py` file of a module in `COMPILED_MODULES`."""
    parts = module.split(".")[1:]
    return os.path.join(package_dir, *parts) + ".py"


def source_hash(module: str, package_dir: str = _PACKAGE_DIR) -> str:
    with open(source_path(module, package_dir), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def pure_requested(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(PURE_ENV, "") not in ("", "0")


def _has_extension(module: str, package_dir: str) -> bool:
    base = source_path(module, package_dir)[: -len(".py")]
    return any(os.path.exists(base + s) for s in importlib.machinery.EXTENSION_SUFFIXES)


def decide(package_dir: str = _PACKAGE_DIR, environ: Mapping[str, str] = os.environ) -> Selection:
    """Which path a process importing the package in `package_dir` runs (see the top)."""
    if pure_requested(environ):
        return Selection(False, f"pure Python ({PURE_ENV}=1)")
    try:
        with open(os.path.join(package_dir, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
        built: dict[str, str] = manifest["sources"]
        compiler = str(manifest.get("compiler", "mypyc"))
    except (OSError, ValueError, KeyError, TypeError):
        return Selection(False, "pure Python (not compiled: no build found)")
    if not all(_has_extension(m, package_dir) for m in COMPILED_MODULES):
        return Selection(False, "pure Python (not compiled: extension modules missing)")
    changed = [m for m in COMPILED_MODULES if built.get(m) != source_hash(m, package_dir)]
    if changed:
        names = ", ".join(changed)
        warnings.warn(
            f"pynatsd: {names} changed since it was compiled; running the pure-Python path. "
            f"Rebuild with: {REBUILD}",
            StaleBuildWarning,
            stacklevel=2,
        )
        return Selection(False, f"pure Python (compiled build is stale: {names})")
    return Selection(True, f"compiled ({compiler})")


class _PureFinder:
    """Finds the modules of `COMPILED_MODULES` as source, ahead of their extension modules."""

    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


_selection: Selection | None = None


def select() -> Selection:
    """Decide the path for this process (once) and install the pure finder if needed."""
    global _selection
    if _selection is None:
        _selection = decide()
        # Imported from a zip (Spark ships the package to executors so), Python's zip importer
        # loads source only: the pure path needs no finder there, and ours reads real files.
        if not _selection.compiled and os.path.isdir(_PACKAGE_DIR):
            sys.meta_path.insert(0, _PureFinder())
    return _selection


def is_compiled(module: ModuleType) -> bool:
    """Whether an imported module is an extension module (compiled) rather than source."""
    return not (module.__file__ or "").endswith(".py")


def describe() -> str:
    """The active path in words, as `pynatsd --version` prints it."""
    return select().reason


def load_pure(module: str) -> ModuleType:
    """The pure-Python copy of a compiled module, under a name of its own (`<module>__pure`),
    so a test can run both paths side by side in one process."""
    name = module + "__pure"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(name, source_path(module))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod
