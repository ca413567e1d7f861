"""A key-value bucket as a table: its latest values, its history, and writes from a DataFrame,
checked with nats-py's KV client."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest

from support.spark import unique

pytestmark = pytest.mark.timeout(240)


def _kv(url: str, bucket: str, action: Any) -> Any:
    async def go() -> Any:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            try:
                kv = await js.key_value(bucket)
            except Exception:
                kv = await js.create_key_value(bucket=bucket, history=10)
            return await action(kv)
        finally:
            await nc.close()

    return asyncio.run(go())


def _read(spark: Any, url: str, bucket: str, **options: str) -> Any:
    reader = spark.read.format("nats").option("servers", url).option("bucket", bucket)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_bucket_latest_values_history_and_writes(spark: Any, js_server: Any) -> None:
    url = js_server.url
    bucket = unique("KV")

    async def fill(kv: Any) -> None:
        await kv.put("a", b"1")
        await kv.put("b", b"2")
        await kv.put("a", b"3")
        await kv.delete("b")
        await kv.put("c.d", b"4")

    _kv(url, bucket, fill)
    latest = _read(spark, url, bucket)
    assert latest.columns == ["key", "data", "revision", "created", "operation"]
    rows = sorted(latest.collect(), key=lambda r: r.key)
    assert [(r.key, bytes(r.data), r.revision, r.operation) for r in rows] == [
        ("a", b"3", 3, "PUT"),
        ("c.d", b"4", 5, "PUT"),
    ]
    assert all(r.created is not None for r in rows)
    history = _read(spark, url, bucket, history="true").orderBy("revision").collect()
    assert [(r.key, r.operation) for r in history] == [
        ("a", "PUT"),
        ("b", "PUT"),
        ("a", "PUT"),
        ("b", "DEL"),
        ("c.d", "PUT"),
    ]

    # A table written back into the bucket: what nats-py reads is what was written.
    df = spark.createDataFrame([("a", "x"), ("e", "y")], "key string, data string")
    df.write.format("nats").option("servers", url).option("bucket", bucket).mode("append").save()

    async def values(kv: Any) -> dict[str, bytes]:
        return {k: (await kv.get(k)).value for k in ("a", "c.d", "e")}

    assert _kv(url, bucket, values) == {"a": b"x", "c.d": b"4", "e": b"y"}
    assert {r.key: bytes(r.data) for r in _read(spark, url, bucket).collect()} == {
        "a": b"x",
        "c.d": b"4",
        "e": b"y",
    }


def test_bucket_errors(spark: Any, js_server: Any) -> None:
    url = js_server.url
    with pytest.raises(Exception, match="bucket 'NOPE' does not exist"):
        _read(spark, url, "NOPE").collect()
    from pynatsd.spark.errors import OptionError
    from pynatsd.spark.options import parse_read_options, parse_write_options

    with pytest.raises(OptionError, match="a bucket is read in batch only"):
        parse_read_options({"bucket": "B"}, "stream")
    with pytest.raises(OptionError, match="invalid bucket name"):
        parse_read_options({"bucket": "a.b"}, "batch")
    with pytest.raises(OptionError, match="takes its subjects from 'key'"):
        parse_write_options({"bucket": "B", "subject": "x"})
    df = spark.createDataFrame([("v",)], "data string")
    with pytest.raises(Exception, match="needs a string 'key' column"):
        df.write.format("nats").option("servers", url).option("bucket", "B").mode("append").save()
