"""A Spark Connect client, run by test_spark_connect.py in a process of its own (a Connect
session changes PySpark's behaviour process-wide, so it stays out of the test session). It does
not import pynatsd: the `nats` source must come from the server side. Prints one JSON object.

    python connect_client.py sc://127.0.0.1:PORT nats://127.0.0.1:PORT STREAM COPY OUTDIR
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(remote: str, servers: str, stream: str, copy: str, out: str) -> dict[str, object]:
    spark = SparkSession.builder.remote(remote).getOrCreate()
    result: dict[str, object] = {"connect": spark.client is not None}

    def read(**options: str) -> object:
        reader = spark.read.format("nats").option("servers", servers).option("stream", stream)
        for key, value in options.items():
            reader = reader.option(key, value)
        return reader.load()

    df = read()
    result["columns"] = df.columns
    result["count"] = df.count()
    result["range"] = [r.seq for r in read(startingOffsets="11", endingOffsets="21").collect()]
    result["headers"] = [
        r.headers for r in read(includeHeaders="true", endingOffsets="3").orderBy("seq").collect()
    ]

    # A write, twice: stored once (Nats-Msg-Id from the source's stream and seq).
    for _ in range(2):
        (
            df.selectExpr(f"concat('{copy}.', subject) as subject", "data", "stream", "seq")
            .write.format("nats")
            .option("servers", servers)
            .option("stream", copy)
            .mode("append")
            .save()
        )
    result["copied"] = read().count() and (
        spark.read.format("nats").option("servers", servers).option("stream", copy).load().count()
    )

    # A streaming query to Parquet with a checkpoint, to the end of what is stored.
    query = (
        spark.readStream.format("nats")
        .option("servers", servers)
        .option("stream", stream)
        .option("maxRecordsPerTrigger", "40")
        .load()
        .writeStream.format("parquet")
        .option("path", out + "/data")
        .option("checkpointLocation", out + "/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    result["streamed"] = sorted(r.seq for r in spark.read.parquet(out + "/data").collect())

    # Planning errors reach the Connect client with the data source's message.
    try:
        read(startingOffset="5").collect()
        result["error"] = ""
    except Exception as e:
        # Connect cuts a long message in the middle; its parameters arrive whole.
        params = e.getMessageParameters() if hasattr(e, "getMessageParameters") else None
        result["error"] = f"{e}\n{json.dumps(params)}"
    spark.stop()
    return result


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:6])))
