"""Builds pynatsd's compiled hot path with mypyc; pyproject.toml holds the project's metadata.

The modules listed in `pynatsd.native.COMPILED_MODULES` are compiled into extension modules that
sit beside their source (`pip install .`, `pip install -e .`, `python setup.py build_ext
--inplace`), and `pynatsd/native.json` records the hash of each source compiled: pynatsd runs
the pure-Python source instead of an extension built from older source (docs/performance.md).
An in-place build (editable install) whose extensions match their source compiles nothing.

Without a C compiler or Python's headers, or with PYNATSD_PURE_PYTHON=1, the package installs as
pure Python and says so on stderr (`pip install -v` shows it; `./test` and `./serve` check the
result with `pynatsd --version`).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
SRC_PACKAGE = os.path.join(HERE, "src", "pynatsd")
NATIVE = runpy.run_path(os.path.join(SRC_PACKAGE, "native.py"))
MODULES: tuple[str, ...] = NATIVE["COMPILED_MODULES"]
# mypyc compiles the modules as one group; its shared library lives inside the package
# (pynatsd/hotpath__mypyc.*.so), not at the top level of site-packages.
GROUP = "pynatsd.hotpath"


def warn(message: str) -> None:
    bar = "!" * 78
    print(
        f"\n{bar}\npynatsd: {message}\npynatsd: installing the PURE-PYTHON hot path (slower)."
        f"\n{bar}\n",
        file=sys.stderr,
    )


def source_hashes() -> dict[str, str]:
    return {m: NATIVE["source_hash"](m, SRC_PACKAGE) for m in MODULES}


def mypyc_extensions() -> list[Extension]:
    try:
        from mypyc.build import mypycify

        sources = [os.path.join("src", *m.split(".")) + ".py" for m in MODULES]
        # The build environment has mypy but not pynatsd's dependencies: errors in the modules
        # the compiled ones import (a dependency's missing types) are not mypyc's business.
        # Its own cache, apart from the one the project's mypy runs keep under other options.
        options = ["--follow-imports=silent", "--cache-dir", os.path.join("build", "mypy_cache")]
        return list(mypycify([*options, *sources], opt_level="3", group_name=GROUP))
    except (Exception, SystemExit) as e:  # mypyc missing, or a type error it refuses
        warn(f"mypyc could not translate the hot path ({type(e).__name__}: {e}).")
        return []


def compiler_name() -> str:
    import mypy.version

    return f"mypyc {mypy.version.__version__}"


# The commands that build (as setuptools' PEP 517 backend and pip call setup.py); metadata-only
# commands (egg_info, dist_info, sdist) also finalize build_ext but must not wait for mypyc.
BUILDING = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}


class BuildHotPath(build_ext):
    """build_ext that translates with mypyc when building, falls back to pure Python when
    compiling fails, and writes the manifest of what it compiled."""

    def finalize_options(self) -> None:
        # Replaced before setuptools finalizes the list (it prepares each Extension there).
        if BUILDING.intersection(sys.argv[1:]):
            self.distribution.ext_modules = self._hot_path()
        super().finalize_options()

    def _hot_path(self) -> list[Extension]:
        if NATIVE["pure_requested"]():
            warn(f"{NATIVE['PURE_ENV']} is set: not compiling.")
            return []
        # Editable installs build in place, beside the source.
        in_place = bool(self.inplace or getattr(self, "editable_mode", False))
        if in_place and NATIVE["decide"](SRC_PACKAGE, {}).compiled:
            self.up_to_date = True  # the extensions beside the source match it: keep them
            return []
        return mypyc_extensions()

    def run(self) -> None:
        if getattr(self, "up_to_date", False):
            return
        manifest = os.path.join(self._package_dir(), NATIVE["MANIFEST"])
        if os.path.exists(manifest):
            os.remove(manifest)  # until this build succeeds, no extension is trusted
        if not self.distribution.ext_modules:
            return
        try:
            super().run()
        except (Exception, SystemExit) as e:  # no compiler or no headers: pure Python
            warn(f"compiling the hot path failed ({type(e).__name__}: {e}).")
            return
        os.makedirs(os.path.dirname(manifest), exist_ok=True)
        with open(manifest, "w", encoding="utf-8") as f:
            json.dump({"compiler": compiler_name(), "sources": source_hashes()}, f, indent=1)

    def _package_dir(self) -> str:
        return SRC_PACKAGE if self.inplace else os.path.join(self.build_lib, "pynatsd")

    def get_outputs(self) -> list[str]:
        outputs: list[str] = super().get_outputs()
        if self.distribution.ext_modules and not self.inplace:
            outputs.append(os.path.join(self._package_dir(), NATIVE["MANIFEST"]))
        return outputs


def placeholder() -> list[Any]:
    # Declares that the package has extensions (a platform wheel, build_ext runs); the real
    # list comes from mypyc when build_ext runs, so metadata-only commands never translate.
    return [Extension(f"{GROUP}__mypyc", sources=[])]


setup(ext_modules=placeholder(), cmdclass={"build_ext": BuildHotPath})
