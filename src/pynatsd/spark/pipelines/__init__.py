"""Ready-to-run pipelines behind `pynatsd spark archive|replay|stats` (see `pynatsd.spark.cli`).
Each is also a plain function taking a SparkSession, for use from a notebook or a job."""

from __future__ import annotations

from pynatsd.spark.pipelines.archive import ArchiveResult, archive
from pynatsd.spark.pipelines.replay import replay
from pynatsd.spark.pipelines.stats import subject_stats, write_stats

__all__ = ["ArchiveResult", "archive", "replay", "subject_stats", "write_stats"]
