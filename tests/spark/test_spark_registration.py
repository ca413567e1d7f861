"""`format("nats")` without registration (the `pyspark_nats` module Spark discovers), and with
`pynatsd.spark.register(spark)`."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

from support.spark import create_stream, publish, unique

ROOT = Path(__file__).resolve().parents[2]


def test_pyspark_nats_is_a_discoverable_top_level_module() -> None:
    # Spark imports every top-level `pyspark_*` module it finds with pkgutil.iter_modules().
    assert "pyspark_nats" in {m.name for m in pkgutil.iter_modules()}
    import pyspark_nats
    from pynatsd.spark import NatsDataSource

    assert pyspark_nats.DefaultSource is NatsDataSource
    assert NatsDataSource.name() == "nats"


def test_a_regular_install_ships_the_module() -> None:
    # An editable install puts src/ on sys.path (above); a wheel installs `py-modules` at the
    # top level of site-packages: the module must be listed and live where package-dir says.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "pyspark_nats" in config["py-modules"]
    assert (ROOT / config["package-dir"][""] / "pyspark_nats.py").is_file()


def test_register_explicitly(spark: Any, js_server: Any) -> None:
    from pynatsd.spark import register

    register(spark)
    name = unique("REG")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 3, f"{name}.x")
    df = spark.read.format("nats").option("servers", js_server.url).option("stream", name).load()
    assert df.count() == 3
