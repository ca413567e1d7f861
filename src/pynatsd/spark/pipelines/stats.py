"""`pynatsd spark stats`: per-subject traffic of a stream (or of an archive): messages, bytes,
the rate per minute (average over the subject's active span, and the busiest minute) and
payload size percentiles; written as a CSV table and a PNG chart."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

PERCENTILES = (0.5, 0.9, 0.99)


def subject_stats(messages: DataFrame) -> Any:
    """A pandas DataFrame, one row per subject, busiest first. `messages` needs the columns
    `subject`, `data` and `timestamp` (a read of the `nats` source, or its archive)."""
    sized = messages.select("subject", F.length("data").alias("size"), "timestamp")
    per_subject = sized.groupBy("subject").agg(
        F.count("*").alias("messages"),
        F.sum("size").alias("bytes"),
        F.min("timestamp").alias("first"),
        F.max("timestamp").alias("last"),
        F.percentile_approx("size", list(PERCENTILES), 10_000).alias("pct"),
    )
    per_minute = (
        sized.groupBy("subject", F.date_trunc("minute", "timestamp").alias("minute"))
        .count()
        .groupBy("subject")
        .agg(F.max("count").alias("peak_per_minute"))
    )
    span = F.greatest((F.unix_micros("last") - F.unix_micros("first")) / 60e6, F.lit(1 / 60))
    table = (
        per_subject.join(per_minute, "subject")
        .select(
            "subject",
            "messages",
            "bytes",
            (F.col("messages") / span).alias("rate_per_minute"),
            "peak_per_minute",
            *[F.col("pct")[i].alias(f"size_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)],
            "first",
            "last",
        )
        .orderBy(F.desc("messages"), "subject")
    )
    return table.toPandas()


def per_minute_traffic(messages: DataFrame, subjects: list[str]) -> Any:
    """Messages per minute for the given subjects (pandas, minute x subject)."""
    counts: Any = (
        messages.where(F.col("subject").isin(subjects))
        .groupBy(F.date_trunc("minute", "timestamp").alias("minute"), "subject")
        .count()
        .toPandas()
    )
    if counts.empty:
        return counts
    return counts.pivot(index="minute", columns="subject", values="count").fillna(0)


def write_stats(messages: DataFrame, out_dir: str, title: str) -> tuple[str, str, Any]:
    """Compute, then write `stats.csv` and `stats.png` into `out_dir`; returns both paths and
    the table."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    table = subject_stats(messages)
    csv_path = os.path.join(out_dir, "stats.csv")
    table.to_csv(csv_path, index=False)

    top = table.head(20)
    fig, (bars, lines) = plt.subplots(2, 1, figsize=(10, 8))
    bars.barh(top["subject"][::-1], top["messages"][::-1], color="#3b7dd8")
    bars.set_xlabel("messages")
    bars.set_title(f"{title}: messages per subject (top {len(top)})")
    traffic = per_minute_traffic(messages, list(top["subject"].head(5)))
    if not traffic.empty:
        for subject in traffic.columns:
            lines.plot(traffic.index, traffic[subject], marker="o", label=subject)
        lines.legend(loc="upper left", fontsize="small")
        if len(traffic.index) == 1:  # one minute: give it some room instead of a year
            minute = traffic.index[0]
            lines.set_xlim(minute - timedelta(minutes=2), minute + timedelta(minutes=2))
        locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
        lines.xaxis.set_major_locator(locator)
        formatter = mdates.ConciseDateFormatter(locator)  # type: ignore[no-untyped-call]
        lines.xaxis.set_major_formatter(formatter)
        lines.set_ylim(0, float(traffic.to_numpy().max()) * 1.15)
    lines.set_ylabel("messages per minute")
    lines.set_title("busiest subjects over time")
    fig.tight_layout()
    png_path = os.path.join(out_dir, "stats.png")
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return csv_path, png_path, table
