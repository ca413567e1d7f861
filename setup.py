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
        return list(mypycify(sources, opt_level="3", group_name=GROUP))
    except (Exception, SystemExit) as e:  # mypyc missing, or a type error it refuses
        warn(f"mypyc could not translate the hot path ({type(e).__name__}: {e}).")
        return []


def compiler_name() -> str:
    import mypy.version

    return f"mypyc {mypy.version.__version__}"


class BuildHotPath(build_ext):
    """build_ext that translates with mypyc when it runs, falls back to pure Python when
    compiling fails, and writes the manifest of what it compiled."""

    def finalize_options(self) -> None:
        super().finalize_options()  # editable installs set `inplace` here
        if NATIVE["pure_requested"]():
            warn(f"{NATIVE['PURE_ENV']} is set: not compiling.")
            self.extensions = []
        elif self.inplace and NATIVE["decide"](SRC_PACKAGE, {}).compiled:
            self.extensions = []  # the extensions beside the source are up to date
            self.keep_manifest = True
        else:
            self.extensions = mypyc_extensions()

    def run(self) -> None:
        if getattr(self, "keep_manifest", False):
            return
        manifest = os.path.join(self._package_dir(), NATIVE["MANIFEST"])
        if os.path.exists(manifest):
            os.remove(manifest)  # until this build succeeds, no extension is trusted
        if not self.extensions:
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
        if self.extensions and not self.inplace:
            outputs.append(os.path.join(self._package_dir(), NATIVE["MANIFEST"]))
        return outputs


def placeholder() -> list[Any]:
    # Declares that the package has extensions (a platform wheel, build_ext runs); the real
    # list comes from mypyc when build_ext runs, so metadata-only commands never translate.
    return [Extension(f"{GROUP}__mypyc", sources=[])]


setup(ext_modules=placeholder(), cmdclass={"build_ext": BuildHotPath})
