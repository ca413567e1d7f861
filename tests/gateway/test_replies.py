"""The `_GR_.` reply prefix (gateway/replies.py) against values seen on the wire from
nats-server 2.15.1 (nats-cluster-facts §4)."""

from __future__ import annotations

import pytest

from pynatsd.gateway import replies


def test_hash_as_nats_server() -> None:
    # Observed: `RMSG $G svc.a _GR_.nI7Itn.qP6IKK._INBOX...` from gateway GW2.
    assert replies.gw_hash("GW2") == b"nI7Itn"


def test_prefix_and_back() -> None:
    prefix = replies.reply_prefix("GW2", "NSERVER")
    assert prefix.startswith(b"_GR_.nI7Itn.") and len(prefix) == replies.SUBJECT_OFFSET
    routed = replies.routed(prefix + b"_INBOX.abc.1")
    assert routed == (b"nI7Itn", replies.gw_hash("NSERVER"), b"_INBOX.abc.1")


@pytest.mark.parametrize(
    "subject", [b"_GR_.", b"_GR_.abcdef.ghijkl.", b"_INBOX.x", b"$GR.", b"GR_.abcdef.ghijkl.x"]
)
def test_not_routed(subject: bytes) -> None:
    assert replies.routed(subject) is None


def test_old_prefix() -> None:
    prefix = replies.old_reply_prefix("GW2")
    assert prefix.startswith(b"$GR.") and len(prefix) == replies.OLD_SUBJECT_OFFSET
    assert replies.routed(prefix + b"r.1") == (replies.old_hash("GW2"), b"", b"r.1")
