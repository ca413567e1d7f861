"""Every bad input gives a clear error naming the option or the cause, raised on the driver
while the query is planned: no Spark job is ever submitted for it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import pynatsd
from pynatsd.spark.errors import OptionError
from pynatsd.spark.options import parse_read_options, parse_write_options
from support.ports import free_port
from support.spark import create_stream, publish, unique

pytestmark = [pytest.mark.timeout(240), pytest.mark.standalone]

# --- the option parser alone (no Spark): one row per mistake ------------------------------------

READ_ERRORS = [
    ({}, "stream", "needs 'stream'"),
    ({"stream": "S", "startingOffset": "1"}, "startingOffset", "did you mean 'startingOffsets'"),
    ({"stream": "S", "startingOffsets": "soon"}, "startingOffsets", "expected 'earliest'"),
    ({"stream": "S", "startingOffsets": "0"}, "startingOffsets", "start at 1"),
    ({"stream": "S", "startingOffsets": '{"T": 5}'}, "startingOffsets", "name exactly the stream"),
    ({"stream": "S", "startingOffsets": "{bad"}, "startingOffsets", "invalid JSON"),
    ({"stream": "S", "endingOffsets": "earliest"}, "endingOffsets", "expected 'latest'"),
    (
        {"stream": "S", "startingOffsets": "1", "startingTimestamp": "0"},
        "startingTimestamp",
        "not both",
    ),
    ({"stream": "S", "startingTimestamp": "yesterday"}, "startingTimestamp", "ISO-8601"),
    ({"stream": "S", "startingTimestamp": "3000-01-01"}, "startingTimestamp", "outside"),
    ({"stream": "S", "maxRecordsPerTrigger": "0"}, "maxRecordsPerTrigger", ">= 1"),
    ({"stream": "S", "maxOffsetsPerTrigger": "x"}, "maxRecordsPerTrigger", "integer"),
    ({"stream": "S", "minPartitions": "0"}, "minPartitions", ">= 1"),
    ({"stream": "S", "failOnDataLoss": "maybe"}, "failOnDataLoss", "true or false"),
    ({"stream": "S", "includeHeaders": "2"}, "includeHeaders", "true or false"),
    ({"stream": "S", "requestTimeout": "-1"}, "requestTimeout", "positive"),
    ({"stream": "S", "subject": "a b"}, "subject", "invalid subject"),
    ({"stream": "S", "subject": "a.>.b"}, "subject", "invalid subject"),
    ({"stream": "S", "subject": "a..b"}, "subject", "invalid subject"),
    ({"stream": "bad.name"}, "stream", "invalid stream name"),
    ({"stream": "S", "servers": "http://x:1"}, "servers", "unsupported scheme"),
    ({"stream": "S", "servers": "x:notaport"}, "servers", "bad port"),
    ({"stream": "S", "servers": " , "}, "servers", "no server"),
    ({"stream": "S", "nats.pasword": "x"}, "nats.pasword", "did you mean 'nats.password'"),
    ({"stream": "S", "nats.password": "x"}, "nats.password", "needs 'nats.user'"),
    ({"stream": "S", "nats.creds": "/no/such.creds"}, "nats.creds", "no such file"),
    ({"stream": "S", "nats.nkey_seed": "nonsense"}, "nats.nkey_seed", "seed"),
    ({"stream": "S", "tls.ca": "/no/ca.pem"}, "tls.ca", "no such file"),
    ({"stream": "S", "queue": "q"}, "queue", "does not apply to stream reads"),
    ({"stream": "S", "msgIdColumn": "id"}, "msgIdColumn", "does not apply to stream reads"),
    ({"subject": "a", "startingOffsets": "1"}, "startingOffsets", "does not apply to subject"),
    ({"subject": "a", "onBufferFull": "explode"}, "onBufferFull", "'fail' or 'drop'"),
    ({"subject": "a", "bufferSize": "0"}, "bufferSize", ">= 1"),
    ({"subject": "a", "timeout": "0"}, "timeout", "positive"),
    ({"subject": "a", "maxMessages": "-5"}, "maxMessages", ">= 1"),
    ({"stream": "S", "path": "/tmp/x"}, "path", "takes no path"),
]


@pytest.mark.parametrize(("options", "option", "text"), READ_ERRORS)
def test_read_option_errors(options: dict[str, str], option: str, text: str) -> None:
    with pytest.raises(OptionError, match=text) as err:
        parse_read_options(options, None)
    assert err.value.option == option
    assert str(err.value).startswith(f"nats: option '{option}'")


@pytest.mark.parametrize(
    ("options", "mode", "option"),
    [
        ({"stream": "S", "endingOffsets": "5"}, "stream", "endingOffsets"),
        ({"stream": "S", "maxRecordsPerTrigger": "5"}, "batch", "maxRecordsPerTrigger"),
        ({"subject": "a", "maxMessages": "5"}, "stream", "maxMessages"),
        ({"subject": "a", "onBufferFull": "drop"}, "batch", "onBufferFull"),
    ],
)
def test_options_of_the_other_query_kind(options: dict[str, str], mode: Any, option: str) -> None:
    with pytest.raises(OptionError) as err:
        parse_read_options(options, mode)
    assert err.value.option == option


WRITE_ERRORS = [
    ({"subject": "a.*"}, "subject", "wildcard"),
    ({"subject": "a,b"}, "subject", "one subject"),
    ({"publishMode": "fast"}, "publishMode", "'auto', 'core' or 'jetstream'"),
    ({"publishMode": "core", "stream": "S"}, "publishMode", "cannot honour"),
    ({"publishMode": "core", "msgIdColumn": "id"}, "msgIdColumn", "JetStream"),
    ({"maxInFlight": "0"}, "maxInFlight", ">= 1"),
    ({"startingOffsets": "1"}, "startingOffsets", "does not apply to writes"),
    ({"includeHeaders": "true"}, "includeHeaders", "does not apply to writes"),
]


@pytest.mark.parametrize(("options", "option", "text"), WRITE_ERRORS)
def test_write_option_errors(options: dict[str, str], option: str, text: str) -> None:
    with pytest.raises(OptionError, match=text) as err:
        parse_write_options(options)
    assert err.value.option == option


def test_options_are_case_insensitive_and_spark_sink_keys_pass() -> None:
    opts = parse_read_options({"STREAM": "S", "startingoffsets": "7"}, "batch")
    assert getattr(opts, "stream", None) == "S"
    parse_write_options({"subject": "x", "checkpointLocation": "/tmp/c"})


# --- through Spark: the error reaches the user, and no job was submitted ------------------------


@pytest.fixture
def no_job(spark: Any) -> Iterator[Callable[[Callable[[], Any], str], None]]:
    sc = spark.sparkContext

    def check(action: Callable[[], Any], text: str) -> None:
        group = unique("err")
        sc.setJobGroup(group, "an error test")
        try:
            with pytest.raises(Exception, match=text):
                action()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        assert list(sc.statusTracker().getJobIdsForGroup(group)) == []

    yield check


def _read(spark: Any, **options: str) -> Any:
    reader = spark.read.format("nats")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _start_and_wait(df: Any) -> None:
    query = df.writeStream.format("noop").start()
    try:
        query.awaitTermination(60)
    finally:
        query.stop()


def test_errors_through_spark(spark: Any, js_server: Any, core_server: Any, no_job: Any) -> None:
    url = js_server.url
    no_job(
        lambda: _read(spark, servers=url, stream="S", startingOffset="5").collect(),
        "unknown option; did you mean 'startingOffsets'",
    )
    no_job(lambda: _read(spark, servers=url).collect(), "needs 'stream'")
    no_job(
        lambda: _read(spark, servers=url, stream="NOPE").collect(), "stream 'NOPE' does not exist"
    )
    name = unique("ERR")
    create_stream(url, name, [f"{name}.>"])
    no_job(
        lambda: _read(spark, servers=url, stream=name, subject="elsewhere.>").collect(),
        f"option 'subject': filter 'elsewhere.>' matches no subject of stream '{name}'",
    )
    dead = f"nats://127.0.0.1:{free_port()}"
    no_job(
        lambda: _read(spark, servers=dead, stream="S").collect(),
        "cannot connect to any server \\(option 'servers'\\)",
    )
    no_job(
        lambda: _read(spark, servers=core_server.client_url, stream="S").collect(),
        "JetStream is not enabled",
    )
    # A streaming query plans in its own thread: the error ends the query as it starts.
    no_job(
        lambda: _start_and_wait(
            spark.readStream.format("nats")
            .option("servers", url)
            .option("stream", "S")
            .option("endingOffsets", "5")
            .load()
        ),
        "option 'endingOffsets': applies to batch reads only",
    )
    no_job(
        lambda: (
            spark.read.format("nats")
            .schema("x int")
            .option("servers", url)
            .option("stream", "S")
            .load()
            .collect()
        ),
        "schema is fixed",
    )
    df = spark.createDataFrame([("a",)], "body string")
    no_job(
        lambda: (
            df.write.format("nats")
            .option("servers", url)
            .option("subject", "x")
            .mode("append")
            .save()
        ),
        "needs a 'data' column",
    )
    ok = spark.createDataFrame([("a",)], "data string")
    no_job(
        lambda: (
            ok.write.format("nats")
            .option("servers", url)
            .option("subject", "x")
            .mode("overwrite")
            .save()
        ),
        "append",
    )
    no_job(
        lambda: (
            ok.write.format("nats")
            .option("servers", url)
            .option("stream", "NOPE")
            .option("subject", "x")
            .mode("append")
            .save()
        ),
        "stream 'NOPE' does not exist",
    )
    no_job(
        lambda: ok.write.format("nats").option("servers", url).mode("append").save(),
        "needs the 'subject' option or a 'subject' column",
    )


def test_data_loss(spark: Any, js_server: Any, no_job: Any) -> None:
    url = js_server.url
    name = unique("LOSS")
    create_stream(url, name, [f"{name}.>"], max_msgs=10)
    publish(url, 30, f"{name}.x")
    no_job(
        lambda: _read(spark, servers=url, stream=name, startingOffsets="5").collect(),
        "no longer holds sequences 5..20.*failOnDataLoss",
    )
    rows = _read(
        spark, servers=url, stream=name, startingOffsets="5", failOnDataLoss="false"
    ).collect()
    assert sorted(r.seq for r in rows) == list(range(21, 31))


def test_bad_credentials(spark: Any, no_job: Any) -> None:
    with pynatsd.ThreadedServer(port=0, username="spark", password="secret") as server:
        url = server.client_url
        no_job(
            lambda: _read(spark, servers=url, subject="x", timeout="1").collect(),
            "refused the connection: Authorization Violation",
        )
        no_job(
            lambda: _read(
                spark,
                servers=url,
                subject="x",
                timeout="1",
                **{"nats.user": "spark", "nats.password": "wrong"},
            ).collect(),
            "Authorization Violation",
        )
        rows = _read(
            spark,
            servers=url,
            subject="x",
            timeout="0.5",
            **{"nats.user": "spark", "nats.password": "secret"},
        ).collect()
        assert rows == []
        assert os.environ.get("PYSPARK_PYTHON")
