"""`pynatsd spark archive|replay|stats ...`: the pipelines as one command each.

`pynatsd.cli` routes `pynatsd spark ...` here: `main(argv)` gets the arguments after `spark` and
returns the exit status (0 done, 1 failed, 2 usage)."""

from __future__ import annotations

import argparse
import re
import sys

from pynatsd.spark.errors import NatsSparkError

DEFAULT_SERVERS = "nats://127.0.0.1:4222"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pynatsd spark",
        description="Data pipelines between NATS and Apache Spark (the `nats` data source).",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--servers",
            default=DEFAULT_SERVERS,
            help=f"NATS server URLs, comma separated (default {DEFAULT_SERVERS})",
        )
        p.add_argument(
            "--master",
            default="local[*]",
            help="Spark master (default local[*]); any spark-submit master works",
        )
        p.add_argument(
            "--option",
            "-o",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="extra option for the nats source (nats.creds=..., tls.ca=...)",
        )

    a = sub.add_parser("archive", help="land a stream in Parquet, partitioned by date")
    a.add_argument("--stream", required=True, help="JetStream stream to archive")
    a.add_argument("--to", required=True, help="output directory (Parquet)")
    a.add_argument("--subject", default="", help="only these subjects (filter, comma list)")
    a.add_argument(
        "--once",
        action="store_true",
        help="archive what is stored now and exit (default: keep running)",
    )
    a.add_argument("--checkpoint", default="", help="checkpoint directory (default TO/_checkpoint)")
    a.add_argument(
        "--trigger",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between micro-batches when running continuously (default 10)",
    )
    a.add_argument("--max-records-per-trigger", type=int, default=None, metavar="N")
    common(a)

    r = sub.add_parser("replay", help="publish archived rows back, deduplicated")
    r.add_argument("--from", dest="source", required=True, help="archive directory (Parquet)")
    target = r.add_mutually_exclusive_group(required=True)
    target.add_argument("--subject", help="publish every row to this subject")
    target.add_argument("--stream", help="publish to the original subjects, into this stream")
    r.add_argument(
        "--unordered",
        action="store_true",
        help="publish in parallel, without keeping the original order",
    )
    common(r)

    s = sub.add_parser("stats", help="per-subject traffic: a CSV table and a PNG chart")
    source = s.add_mutually_exclusive_group(required=True)
    source.add_argument("--stream", help="read this stream")
    source.add_argument("--from", dest="source", help="read this archive (Parquet)")
    s.add_argument("--subject", default="", help="only these subjects (stream filter)")
    s.add_argument("--out", default="nats-stats", help="output directory (default nats-stats)")
    common(s)
    return parser


def _options(pairs: list[str]) -> dict[str, str]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise NatsSparkError(f"--option expects KEY=VALUE, got {pair!r}")
        options[key.strip()] = value
    return options


def _reason(error: BaseException) -> str:
    """The `nats: ...` line of an error Spark wrapped in its own message, if there is one."""
    text = str(error)
    found = re.findall(r"nats: [^\n]*", text)
    if found:
        return str(found[-1]).strip()
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help or a usage error, already printed by argparse
        return int(e.code or 0)
    try:
        return _run(args)
    except Exception as e:  # a command line reports, it does not crash
        print(f"pynatsd spark {args.command}: {_reason(e)}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    from pynatsd.spark.pipelines.session import spark_session

    options = _options(args.option)
    with spark_session(args.master, f"pynatsd spark {args.command}") as spark:
        if args.command == "archive":
            from pynatsd.spark.pipelines.archive import archive

            result = archive(
                spark,
                servers=args.servers,
                stream=args.stream,
                to=args.to,
                once=args.once,
                checkpoint=args.checkpoint,
                subject=args.subject,
                trigger_seconds=args.trigger,
                max_records_per_trigger=args.max_records_per_trigger,
                options=options,
            )
            print(
                f"archived {result.rows} messages of stream {args.stream} in "
                f"{result.batches} micro-batches to {args.to}"
            )
        elif args.command == "replay":
            from pynatsd.spark.pipelines.replay import replay

            count = replay(
                spark,
                servers=args.servers,
                source=args.source,
                subject=args.subject or "",
                stream=args.stream or "",
                ordered=not args.unordered,
                options=options,
            )
            target = f"subject {args.subject}" if args.subject else f"stream {args.stream}"
            print(
                f"replayed {count} rows from {args.source} to {target} (duplicates are "
                "dropped by the server)"
            )
        else:
            from pynatsd.spark.pipelines.stats import write_stats

            if args.stream:
                reader = (
                    spark.read.format("nats")
                    .option("servers", args.servers)
                    .option("stream", args.stream)
                )
                if args.subject:
                    reader = reader.option("subject", args.subject)
                for key, value in options.items():
                    reader = reader.option(key, value)
                messages = reader.load()
            else:
                messages = spark.read.parquet(args.source)
            csv_path, png_path, table = write_stats(messages, args.out, args.stream or args.source)
            print(table.to_string(index=False))  # to_string: every column, not abbreviated
            print(f"wrote {csv_path} and {png_path}")
    return 0


if __name__ == "__main__":  # `python -m pynatsd.spark.cli archive ...`
    sys.exit(main(sys.argv[1:]))
