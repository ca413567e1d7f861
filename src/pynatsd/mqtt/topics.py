"""MQTT topics <-> NATS subjects, as nats-server maps them.

Corresponds to `mqttToNATSSubjectConversion`, `natsSubjectToMQTTTopic`,
`mqttNeedSubForLevelUp` and `isMQTTReservedSubscription` in nats-server's `server/mqtt.go`:
- `/` separates levels: it becomes `.`; an empty level keeps a `/` in the subject
  (`/foo` -> `/.foo`, `foo/` -> `foo./`, `foo//bar` -> `foo./.bar`);
- a literal `.` becomes `//`;
- in a filter, `+` becomes `*` and `#` becomes `>` (never in a topic name);
- whitespace and DEL are refused.
"""

from __future__ import annotations


class TopicError(ValueError):
    """A topic or filter nats-server refuses; the message is its error text."""


_UNSUPPORTED = frozenset(b" \t\n\r\x0c\x7f")
# Bytes that need more than `/` -> `.`: the unsupported ones, `.` and the wildcards.
_SPECIAL = _UNSUPPORTED | frozenset(b".+#")


def topic_to_subject(topic: bytes) -> bytes:
    """A PUBLISH topic name as a NATS subject (mqttTopicToNATSPubSubject)."""
    return _to_subject(topic, wildcards=False)


def filter_to_subject(topic_filter: bytes) -> bytes:
    """A SUBSCRIBE topic filter as a NATS subject (mqttFilterToNATSSubject)."""
    return _to_subject(topic_filter, wildcards=True)


def _to_subject(mt: bytes, wildcards: bool) -> bytes:
    if mt[:1] != b"/" and mt[-1:] != b"/" and b"//" not in mt and not _SPECIAL.intersection(mt):
        return mt.replace(b"/", b".")  # the common case: levels, no empty one, nothing else
    out = bytearray()
    end = len(mt) - 1
    for i, c in enumerate(mt):
        if c == 0x2F:  # '/'
            if i == 0 or out[-1] == 0x2E:
                out += b"/."
            elif i == end or mt[i + 1] == 0x2F:
                out += b"./"
            else:
                out.append(0x2E)
        elif c in _UNSUPPORTED:
            raise TopicError("character not supported for MQTT topics")
        elif c == 0x2E:  # '.'
            out += b"//"
        elif c in (0x2B, 0x23):  # '+', '#'
            if not wildcards:
                raise TopicError(f"wildcards not allowed in publish's topic: {mt!r}")
            out.append(0x2A if c == 0x2B else 0x3E)
        else:
            out.append(c)
    if out and out[-1] == 0x2E:
        out.append(0x2F)
    return bytes(out)


def subject_to_topic(subject: bytes) -> bytes:
    """A NATS subject as an MQTT topic name (natsSubjectToMQTTTopic), for deliveries."""
    if b"/" not in subject:
        return subject.replace(b".", b"/")  # the common case: no empty level, no `.` in it
    out = bytearray()
    end = len(subject) - 1
    i = 0
    while i <= end:
        c = subject[i]
        if c == 0x2F:  # '/'
            if i < end:
                nxt = subject[i + 1]
                if nxt == 0x2E:
                    out.append(0x2F)
                    i += 1
                elif nxt == 0x2F:
                    out.append(0x2E)
                    i += 1
        elif c == 0x2E:
            out.append(0x2F)
        else:
            out.append(c)
        i += 1
    return bytes(out)


def level_up_subject(subject: bytes) -> bytes | None:
    """For a filter ending in `/#` (`foo.>`), the parent level nats-server also subscribes to
    (`foo`), since `#` matches the parent in MQTT; None otherwise (mqttNeedSubForLevelUp)."""
    if len(subject) >= 3 and subject.endswith(b".>"):
        return subject[:-2]
    return None


def is_reserved_filter(subject: bytes) -> bool:
    """A filter starting with a wildcard, which must not match topics starting with `$`
    [MQTT-4.7.2-1] (isMQTTReservedSubscription)."""
    return subject in (b">", b"*") or subject.startswith(b"*.")
