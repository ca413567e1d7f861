"""Child process of the raft log's kill -9 test: appends until it is killed.

Prints ``ready <last_index>`` once open, then ``ok <index> <digest>`` after each entry is
synced. An entry's data is the digest (the first 16 hex digits of the SHA-256 of the rest)
followed by the rest, so the parent can tell a whole entry from a damaged one. Every 40
entries it compacts the log, as after a snapshot.
"""

from __future__ import annotations

import hashlib
import random
import sys
from pathlib import Path

from pynatsd.raft.log import FileLog
from pynatsd.raft.wire import AppendEntry, Entry


def main(directory: str, round_no: int) -> None:
    lg = FileLog(Path(directory), segment_bytes=4096)
    rnd = random.Random(round_no)
    term = round_no + 1
    print(f"ready {lg.last_index}", flush=True)
    while True:
        index = lg.last_index + 1
        rest = b"%d." % index + rnd.randbytes(rnd.randrange(0, 300))
        digest = hashlib.sha256(rest).hexdigest()[:16]
        lg.append(
            AppendEntry(
                "leader01",
                term,
                index - 1,
                lg.last_term,
                index - 1,
                (Entry(0, digest.encode() + rest),),
            )
        )
        lg.sync()
        print(f"ok {index} {digest}", flush=True)
        if index % 40 == 0:
            keep = index - 15
            lg.compact(keep, lg.term_at(keep) or 0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
