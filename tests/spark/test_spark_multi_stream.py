"""Several streams in one query: `stream` as a comma list, offsets `{"A": n, "B": m}`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.spark import create_stream, publish, unique

pytestmark = pytest.mark.timeout(240)


def _pairs(rows: list[Any]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in rows:
        out.setdefault(r.stream, []).append(r.seq)
    return {k: sorted(v) for k, v in out.items()}


def test_two_streams_batch_and_streaming(spark: Any, js_server: Any, tmp_path: Path) -> None:
    url = js_server.url
    a, b = unique("MA"), unique("MB")
    create_stream(url, a, [f"{a}.>"])
    create_stream(url, b, [f"{b}.>"])
    publish(url, 300, f"{a}.x")
    publish(url, 100, f"{b}.x")

    def read(**options: str) -> Any:
        reader = spark.read.format("nats").option("servers", url).option("stream", f"{a},{b}")
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    assert _pairs(read().collect()) == {a: list(range(1, 301)), b: list(range(1, 101))}
    some = read(startingOffsets=json.dumps({a: 101, b: -1}), endingOffsets="latest")
    assert _pairs(some.collect()) == {a: list(range(101, 301))}

    def run() -> list[Any]:
        query = (
            spark.readStream.format("nats")
            .option("servers", url)
            .option("stream", f"{a},{b}")
            .option("maxRecordsPerTrigger", "160")
            .load()
            .writeStream.format("parquet")
            .option("path", str(tmp_path / "out"))
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120)
        finally:
            query.stop()
        if query.exception() is not None:
            raise query.exception()
        return [p for p in query.recentProgress if p["numInputRows"]]

    progress = run()
    # 400 rows in batches of at most 160, each stream's share in proportion to what it has.
    assert [p["numInputRows"] for p in progress] == [160, 160, 80]
    assert json.loads(progress[0]["sources"][0]["endOffset"]) == {a: 121, b: 41}
    publish(url, 10, f"{b}.x", start=100)
    assert [p["numInputRows"] for p in run()] == [10]  # a restart reads only the new ones
    stored = spark.read.parquet(str(tmp_path / "out")).select("stream", "seq").collect()
    assert _pairs(stored) == {a: list(range(1, 301)), b: list(range(1, 111))}


def test_several_streams_option_errors() -> None:
    from pynatsd.spark.errors import OptionError
    from pynatsd.spark.options import parse_read_options

    for options, text in [
        ({"stream": "A,A"}, "distinct stream names"),
        ({"stream": "A,B", "startingOffsets": '{"A": 1}'}, "name exactly the streams"),
        ({"stream": "A,B", "startingOffsets": "5"}, "JSON per stream"),
        ({"stream": "A,B.c"}, "invalid stream name"),
    ]:
        with pytest.raises(OptionError, match=text):
            parse_read_options(options, "batch")
