"""`pynatsd spark archive|replay|stats`, through `pynatsd.spark.cli.main`, in the test session."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from pynatsd.spark.cli import main
from support.spark import (
    create_stream,
    delete_stream,
    publish,
    stream_messages,
    stream_state,
    unique,
)

pytestmark = pytest.mark.timeout(240)


def test_archive_replay_and_stats(
    spark: Any, js_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = js_server.url
    name = unique("ARCH")
    create_stream(url, name, [f"{name}.>"])
    publish(
        url,
        300,
        lambda i: f"{name}.{'orders' if i % 3 else 'payments'}",
        headers=lambda i: {"Trace": str(i)} if i % 2 else None,
    )
    archive_dir = tmp_path / "archive"
    argv = ["archive", "--stream", name, "--to", str(archive_dir), "--once", "--servers", url]
    assert main(argv) == 0
    assert "archived 300 messages" in capsys.readouterr().out

    publish(url, 100, f"{name}.orders", start=300)
    assert main(argv) == 0
    assert "archived 100 messages" in capsys.readouterr().out  # exactly the new ones
    archived = spark.read.parquet(str(archive_dir))
    assert archived.columns == ["subject", "data", "headers", "stream", "seq", "timestamp", "date"]
    assert sorted(r.seq for r in archived.select("seq").collect()) == list(range(1, 401))
    assert [
        p.name.startswith("date=") for p in archive_dir.iterdir() if not p.name.startswith("_")
    ] == [True]
    assert archived.where("seq = 2").collect()[0].headers == {"Trace": ["1"]}

    # Replay to one subject, captured by another stream: twice, stored once.
    copy = unique("COPY")
    create_stream(url, copy, [f"{copy}.>"])
    replay = ["replay", "--from", str(archive_dir), "--subject", f"{copy}.all", "--servers", url]
    assert main(replay) == 0
    assert main(replay) == 0
    assert "replayed 400 rows" in capsys.readouterr().out
    assert stream_state(url, copy) == (400, 1, 400)
    stored = stream_messages(url, copy)
    assert [d for _, _, d, _ in sorted(stored)] == [f"msg-{i}".encode() for i in range(400)]

    # Replay to the original subjects, into a new stream that captures them.
    delete_stream(url, name)
    again = unique("AGAIN")
    create_stream(url, again, [f"{name}.>"])
    replay = ["replay", "--from", str(archive_dir), "--stream", again, "--servers", url]
    assert main(replay) == 0
    assert main(replay) == 0
    stored = sorted(stream_messages(url, again))
    assert len(stored) == 400
    assert [s for _, s, _, _ in stored[:3]] == [
        f"{name}.payments",
        f"{name}.orders",
        f"{name}.orders",
    ]
    assert stored[1][3] is not None and stored[1][3]["Trace"] == "1"
    assert stored[1][3]["Nats-Msg-Id"] == f"{name}:2"

    # Stats of the new stream: a table and a chart.
    out = tmp_path / "stats"
    assert main(["stats", "--stream", again, "--out", str(out), "--servers", url]) == 0
    printed = capsys.readouterr().out
    assert f"{name}.orders" in printed and "wrote" in printed
    with open(out / "stats.csv") as f:
        table = {row["subject"]: row for row in csv.DictReader(f)}
    assert int(table[f"{name}.orders"]["messages"]) == 300
    assert int(table[f"{name}.payments"]["messages"]) == 100
    assert int(table[f"{name}.payments"]["bytes"]) == sum(len(f"msg-{i}") for i in range(0, 300, 3))
    assert float(table[f"{name}.orders"]["rate_per_minute"]) > 0
    assert 5 <= float(table[f"{name}.orders"]["size_p50"]) <= 7
    assert (out / "stats.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Stats of the archive work the same way.
    assert main(["stats", "--from", str(archive_dir), "--out", str(tmp_path / "s2")]) == 0


def test_cli_errors(
    spark: Any, js_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["archive"]) == 2
    assert "required" in capsys.readouterr().err
    argv = [
        "archive",
        "--stream",
        "NOPE",
        "--to",
        str(tmp_path / "x"),
        "--once",
        "--servers",
        js_server.url,
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("pynatsd spark archive: nats: stream 'NOPE' does not exist")
    assert main(["replay", "--from", str(tmp_path), "--subject", "x", "--option", "bad"]) == 1
    assert "KEY=VALUE" in capsys.readouterr().err
