"""The client protocol session: what a client may do and what the server answers, without sockets.

Corresponds to the protocol half of nats-server's `server/client.go` (`processConnect`,
`processSub`, `processUnsub`, `processInboundClientMsg`, `processPing`). Events come from the
sans-IO parser; frames go out through the connection's `Outbound` queue; delivery to other
receivers goes through `server.delivery`. The asyncio adapter (`server.client.Client`) supplies the
transport, the timers and the close.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, cast

from pynatsd.auth import AuthResult, PermissionChecker
from pynatsd.gofmt import go_duration
from pynatsd.logger import TRACE, log
from pynatsd.options import NO_LIMIT
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import (
    Connect,
    Err,
    Event,
    Info,
    Ok,
    Ping,
    Pong,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
    make_pub,
)
from pynatsd.protocol.frames import (
    OK_FRAME,
    PONG_FRAME,
    err_frame,
    info_frame,
    msg_head,
    no_responders_frame,
)
from pynatsd.protocol.parser import Parsed, Parser
from pynatsd.protocol.runs import PubRun, SubRun
from pynatsd.server import msgtrace
from pynatsd.server.connect import (
    PRE_CONNECT_OPTIONS,
    connection_label,
    merge_connect_options,
    redacted,
)
from pynatsd.server.delivery import Receiver, Stats, fan_out
from pynatsd.server.events import client_connected, conns_changed
from pynatsd.server.limits import connection_limits
from pynatsd.server.msgtrace import TRACE_DEST_NEEDLE
from pynatsd.server.outbound import Outbound
from pynatsd.server.plans import PlanCache
from pynatsd.server.reserved import (
    JS_ACK_PREFIX,
    RESERVED_FIRST_BYTES,
    RESERVED_REPLY_PREFIXES,
    is_reserved_reply,
    is_reserved_subject,
)
from pynatsd.server.subscribe import subscribe_run
from pynatsd.server.subscription import InternalSubscription, Subscription
from pynatsd.subjects import is_valid_literal_subject_bytes
from pynatsd.sublist import InvalidSubjectError

if TYPE_CHECKING:
    from pynatsd.mappings import SubjectMappings
    from pynatsd.options import User
    from pynatsd.server.accounts import Account
    from pynatsd.server.msgtrace import MsgTrace
    from pynatsd.server.server import Server


class ClientSession:
    """One client's protocol state. Attributes named as in /connz where they are reported
    there. Subclassed by the asyncio adapter, which implements the I/O hooks at the end."""

    # Slots: thousands of connections, each with dozens of fields, add up.
    __slots__ = (
        "_auth_waiting",
        "_careful_pub",
        "_stashed",
        "_trace_parent",
        "account",
        "auth_user",
        "cid",
        "claim_expires",
        "close_reason",
        "closed",
        "config_user",
        "connect_opts",
        "connected",
        "echo",
        "first_pong_sent",
        "headers",
        "host",
        "label",
        "label_set",
        "log_user",
        "max_subs",
        "name_tag",
        "no_responders",
        "nonce",
        "outbound",
        "parser",
        "pedantic",
        "peer_cert",
        "perms",
        "pings_out",
        "plans",
        "port",
        "protocol",
        "rtt",
        "rtt_start",
        "server",
        "start",
        "stats",
        "stop",
        "sublist",
        "subs",
        "trace",
        "verbose",
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        opts = server.options
        self.cid = server.next_cid()
        self.account: Account = server.global_account
        # The account's SubList, kept beside it: the planned-delivery path reads its generation
        # for every message.
        self.sublist = self.account.sublist
        self.parser = Parser(
            max_payload=opts.max_payload,
            max_control_line=opts.max_control_line,
            expect_connect=server.auth_required and not opts.no_auth_user,
            headers=False,
            headers_supported=not opts.no_header_support,
            runs=True,
        )
        self.host = ""
        self.port = 0
        self.label = ""
        self.label_set = False
        self.subs: dict[bytes, Subscription] = {}
        # CONNECT options; nats-server decodes CONNECT on top of these defaults.
        self.connect_opts: dict[str, Any] = dict(PRE_CONNECT_OPTIONS)
        self.connected = False
        # Until a CONNECT says otherwise nats-server treats a connection as verbose and
        # pedantic (its defaultOpts): ops before CONNECT get +OK and subject checks.
        self.verbose = True
        self.pedantic = True
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.protocol = 0
        self.first_pong_sent = False
        self.auth_user = ""
        self.closed = False
        self.close_reason = ""
        self.outbound = Outbound(server, opts.max_pending, opts.write_deadline, self._slow_consumer)
        self.stats = Stats()
        self.start = time.time()
        self.stop = 0.0
        self.rtt = 0.0
        self.rtt_start = 0.0
        self.pings_out = 0
        self.trace = log.isEnabledFor(TRACE)
        self.nonce = ""
        self.peer_cert: bytes | None = None
        self.perms = PermissionChecker(None)
        # The `users` entry this connection authenticated as (None: token, single user, JWT,
        # no authentication); a reload closes the connection when the entry is gone.
        self.config_user: User | None = None
        self.max_subs = opts.max_subscriptions or NO_LIMIT
        # When the user's credentials expire (seconds since the epoch, whole seconds as
        # nats-server's c.expires), 0 for never: $SYS.REQ.USER.INFO reports it.
        self.claim_expires = 0.0
        # The user as nats-server's log lines name it ("jwt:U...", "user:alice"), "" for none.
        self.log_user = ""
        # A user JWT's `name` ($SYS.REQ.USER.INFO's user_name).
        self.name_tag = ""
        self._auth_waiting = False
        self._stashed: list[Parsed] = []
        self.plans = PlanCache()
        # True when a PUB needs more than a planned delivery (trace, pedantic, verbose).
        self._careful_pub = True
        # The account traces messages with a sampled W3C traceparent (msg_trace): every
        # HPUB's header is then looked at, not only those naming a Nats-Trace-Dest.
        self._trace_parent = False

    # -- the receiver side (server.delivery.Receiver) --------------------------------------------

    @property
    def plain(self) -> bool:
        return not self.trace and not self.perms.watching

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        payload = msg.payload
        if msg.header_size > 0 and not self.headers:
            # A client that did not ask for headers gets the body alone, sized as such.
            payload = payload[msg.header_size :]
            head = msg_head(msg.subject, sub.sid, msg.reply, b"%d" % len(payload))
        elif msg.header_size > 0:
            head = msg_head(msg.subject, sub.sid, msg.reply, msg.size_text, msg.header_text)
        else:
            head = msg_head(msg.subject, sub.sid, msg.reply, msg.size_text)
        self.stats.sent(1, len(payload))
        if self.trace:
            self.trace_out(head)
        self.outbound.push(head + payload + b"\r\n")

    def unsubscribe(self, sub: Subscription) -> None:
        if sub.closed:
            return
        sub.closed = True
        self.subs.pop(sub.sid, None)
        self.account.sublist.remove(sub)

    # -- events from the parser ------------------------------------------------------------------

    def handle_events(self, events: list[Parsed]) -> None:
        """Handle one read's events, then settle the planned deliveries' statistics. The
        messages whose lines have a valid plan go through the compiled loop of
        `PlanCache.send_events`; the rest one by one."""
        plans = self.plans
        i = 0
        n = len(events)
        while i < n:
            ev = events[i]
            kind = type(ev)
            # (A `Pub` without a line, a JetStream ack's, has no plan to look for.)
            if (kind is PubRun or (kind is Pub and ev[4])) and not self._careful_pub:  # type: ignore[index]
                planned = plans.send_events(
                    events, i, self.sublist.genid, self.server.dirty, self.stats
                )
                if planned > i:
                    i = planned
                    continue
            if kind is Pub and not ev[4] and not self._careful_pub:  # type: ignore[index]
                # A Pub without a line: a JetStream ack. A run of them to one consumer is
                # handed over at once.
                done = self._process_acks(events, i)
                if done > i:
                    i = done
                    continue
            i += 1
            if kind is Pub:
                self._process_pub(ev)  # type: ignore[arg-type]
            elif kind is PubRun:
                self._process_run(ev)  # type: ignore[arg-type]
            elif kind is SubRun:  # clients subscribe in bursts (100k at start-up)
                subscribe_run(self, ev)  # type: ignore[arg-type]
            else:
                self._process_event(cast(Event, ev))
                if self._auth_waiting:
                    # A slow credential check (bcrypt) runs off the loop; what followed the
                    # CONNECT in this read waits for it.
                    self._stashed = events[i:]
                    break
            if self.closed:
                break
        plans.settle()

    def _process_event(self, ev: Event) -> None:
        kind = type(ev)
        if kind is Sub:  # first: clients subscribe in bursts
            self._process_sub(ev)  # type: ignore[arg-type]
        elif kind is Ping:
            self._process_ping()
        elif kind is Pong:
            self.pings_out = 0
            if self.rtt_start:
                self.rtt = max(time.monotonic() - self.rtt_start, 1e-9)
        elif kind is Unsub:
            assert isinstance(ev, Unsub)
            self._process_unsub(ev)
        elif kind is Connect:
            assert isinstance(ev, Connect)
            self._process_connect(ev)
        elif kind is ProtocolError:
            assert isinstance(ev, ProtocolError)
            self._process_protocol_error(ev)
        elif kind is Err:
            assert isinstance(ev, Err)
            log.error("%s - Client Error %s", self.label, ev.text.decode(errors="replace"))
            self.close(CloseReason.PARSE_ERROR)
        elif kind is Info or kind is Ok:
            pass

    def _process_protocol_error(self, ev: ProtocolError) -> None:
        if ev.reply == errors.AUTHORIZATION_VIOLATION:
            log.error("%s - Authorization Error", self.label)
        elif ev.reply is None:
            log.error("%s - Client parser ERROR: %s", self.label, ev.detail)
        else:
            log.error("%s - %s", self.label, ev.reply)
        if ev.pub is not None:
            msgtrace.trace_refused_payload(self, ev.pub)
        if ev.reply is not None:
            self.outbound.push(err_frame(ev.reply))
        self.close(ev.close_reason)

    def _process_ping(self) -> None:
        self.outbound.push(PONG_FRAME)
        if self.connected and not self.first_pong_sent:
            self.first_pong_sent = True
            if self.protocol >= 1:
                self.outbound.push(info_frame(self.server.async_info(self, connect_info=True)))

    # -- CONNECT ---------------------------------------------------------------------------------

    def _process_connect(self, ev: Connect) -> None:
        if self.trace:
            log.log(TRACE, "%s - <<- [CONNECT %s]", self.label, redacted(ev.raw))
        self.connect_started()
        opts = merge_connect_options(self.connect_opts, ev.options)
        if opts is None:
            log.error("%s - invalid CONNECT", self.label)
            self.close(CloseReason.PROTOCOL_VIOLATION)
            return
        self.connect_opts = opts
        first = not self.connected
        self.connected = True
        if not first and self.subs:
            # A second CONNECT may change the account: nats-server drops every subscription.
            self._drop_subscriptions()
        server = self.server
        self.headers = bool(opts.get("headers")) and not server.options.no_header_support
        self.echo = opts.get("echo", True) is not False
        self.verbose = bool(opts.get("verbose"))
        self.pedantic = bool(opts.get("pedantic"))
        self.no_responders = bool(opts.get("no_responders"))
        self.protocol = int(opts.get("protocol") or 0)
        if server.authenticator.is_slow(opts):
            self._auth_waiting = True
            self.authenticate_off_loop(opts)
            return
        self.finish_connect(opts, self.authenticate(opts))

    def _drop_subscriptions(self) -> None:
        subs = list(self.subs.values())
        for sub in subs:
            sub.closed = True
        self.account.sublist.remove_batch(subs)
        self.subs.clear()

    def authenticate(self, opts: dict[str, Any]) -> AuthResult | None:
        return self.server.authenticator.check(
            opts, self.nonce, self.peer_cert, "STANDARD", self.host
        )

    def finish_connect(self, opts: dict[str, Any], result: AuthResult | None) -> None:
        first = not self.label_set
        if result is None:
            log.error("%s - Authorization Error", self.label)
            self.close_with_error(
                errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION
            )
            return
        if not self.bind(result):
            return
        if opts.get("account") or opts.get("new_account"):
            self.close_with_error(
                errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION
            )
            return
        if first:
            self.label = connection_label(self.label, opts)
            self.label_set = True
        self._careful_pub = self.trace or self.pedantic or self.verbose
        if self.protocol < 0 or self.protocol > 1:
            self.close_with_error(
                errors.INVALID_CLIENT_PROTOCOL, CloseReason.BAD_CLIENT_PROTOCOL_VERSION
            )
            return
        if self.no_responders and not self.headers:
            self.close_with_error(
                errors.NO_RESPONDERS_REQUIRES_HEADERS, CloseReason.NO_RESPONDERS_REQUIRES_HEADERS
            )
            return
        if self.verbose:
            self.outbound.push(OK_FRAME)
        if first:
            conns_changed(self.server, self.account)
            if self.account is not self.server.system_account:
                client_connected(self.server, self)

    def recheck_auth(self) -> bool:
        """After a configuration reload: authenticate this connection's CONNECT again and bind
        it anew (limits, permissions), as nats-server's reloadAuthorization does. False when
        the credentials no longer pass or no longer lead to this account (the caller closes
        the connection), or when binding closed it (account or subscription limit)."""
        result = self.authenticate(self.connect_opts)
        return result is not None and result.account == self.account.name and self.bind(result)

    def bind(self, result: AuthResult) -> bool:
        """Attach what authentication decided: account, permissions, limits, expiry. Runs at
        CONNECT and again on every configuration reload, as nats-server registers a client
        with its account (registerWithAccount) each time; False when that closed the client."""
        server = self.server
        account = server.get_account(result.account)
        limit = account.max_connections
        # The other clients of the account: this one counts only once it has joined.
        others = account.num_clients - (1 if account is self.account else 0)
        if limit >= 0 and others >= limit:
            self.close_with_error(
                errors.MAXIMUM_ACCOUNT_CONNECTIONS_EXCEEDED,
                CloseReason.MAX_CONNECTIONS_EXCEEDED,
            )
            return False
        if account is not self.account:
            self.account.num_clients -= 1
            account.num_clients += 1
            self.account = account
            self.sublist = account.sublist
        self._trace_parent = account.config is not None and bool(account.config.trace_dest)
        perms = result.permissions
        if perms is None and account.config is not None:
            perms = account.config.default_permissions
        self.perms = PermissionChecker(perms)
        # Cached delivery plans hold permission decisions taken under the old permissions.
        self.plans.clear()
        self.config_user = result.user
        self.auth_user = result.user_label if result.method != "none" else ""
        self.log_user = result.log_label if result.method != "none" else ""
        self.name_tag = result.name_tag
        limits = connection_limits(
            server.options, account.config, result.max_payload, result.max_subscriptions
        )
        self.parser.max_payload = limits.max_payload
        self.max_subs = limits.max_subscriptions
        if self.max_subs >= 0 and len(self.subs) >= self.max_subs:
            # nats-server checks this at every registration (applyAccountLimits): a client
            # at (or over) its subscription limit is told so and closed, at CONNECT too (a
            # JWT's `subs: 0` allows no subscription at all).
            log.error("%s - %s", self.label, errors.MAXIMUM_SUBSCRIPTIONS_EXCEEDED)
            self.close_with_error(
                errors.MAXIMUM_SUBSCRIPTIONS_EXCEEDED, CloseReason.MAX_SUBSCRIPTIONS_EXCEEDED
            )
            return False
        self._set_expiry(result)
        return True

    def _set_expiry(self, result: AuthResult) -> None:
        """nats-server keeps two timers: the user's (setExpiration: "User Authentication
        Expired") and the account's, one per account JWT (checkExpiration: "Account
        Authentication Expired" to every client of it). The account's starts first, when the
        account is registered, so it wins a tie."""
        user, account = result.expires_at, result.account_expires_at
        self.claim_expires = float(int(user)) if user else 0.0
        if account and (not user or account <= user):
            self.expire_at(account, errors.ACCOUNT_AUTHENTICATION_EXPIRED)
        elif user:
            self.expire_at(user, errors.AUTHENTICATION_EXPIRED)

    # -- SUB / UNSUB -----------------------------------------------------------------------------

    def _process_sub(self, ev: Sub) -> None:
        if self.trace:
            line = b" ".join(p for p in (ev.subject, ev.queue, ev.sid) if p)
            log.log(TRACE, "%s - <<- [SUB %s]", self.label, line.decode(errors="replace"))
        subject = ev.subject.decode("utf-8", "surrogateescape")
        queue = ev.queue.decode("utf-8", "surrogateescape") if ev.queue else None
        perms = self.perms
        if (perms.sub_restricted or queue is not None) and not perms.can_subscribe(subject, queue):
            log.error(
                "%s - Subscription Violation - %s, SID %s",
                self.label,
                f'Subject "{subject}" using queue "{queue}"' if queue else f'Subject "{subject}"',
                ev.sid.decode(errors="replace"),
            )
            self.send_err(errors.permissions_subscribe(subject, queue))
            return
        max_tokens = self.server.options.max_sub_tokens
        if max_tokens > 0 and subject.count(".") + 1 > max_tokens:
            self.send_err(errors.permissions_subscribe_tokens(subject))
            return
        max_subs = self.max_subs
        if max_subs >= 0 and len(self.subs) >= max_subs:
            log.error("%s - %s", self.label, errors.MAXIMUM_SUBSCRIPTIONS_EXCEEDED)
            self.send_err(errors.MAXIMUM_SUBSCRIPTIONS_EXCEEDED)
            return
        if ev.sid in self.subs:
            # A reused sid is silently ignored; the first subscription stays.
            if self.verbose:
                self.outbound.push(OK_FRAME)
            return
        sub = Subscription(self, ev.subject, ev.queue, ev.sid, subject, queue)
        try:
            self.account.sublist.insert(sub)
        except InvalidSubjectError:
            self.send_err(errors.INVALID_SUBJECT)
            return
        self.subs[ev.sid] = sub
        if self.verbose:
            self.outbound.push(OK_FRAME)

    def _process_unsub(self, ev: Unsub) -> None:
        if self.trace:
            max_msgs = f" {ev.max_msgs}" if ev.max_msgs > 0 else ""
            sid = ev.sid.decode(errors="replace")
            log.log(TRACE, "%s - <<- [UNSUB %s%s]", self.label, sid, max_msgs)
        sub = self.subs.get(ev.sid)
        if sub is not None:
            if ev.max_msgs > 0 and ev.max_msgs > sub.delivered:
                sub.max_msgs = ev.max_msgs
                # Delivery plans made before (a publisher's, a route's) skip the count:
                # a new generation drops them.
                self.account.sublist.genid += 1
            else:
                self.unsubscribe(sub)
        if self.verbose:
            self.outbound.push(OK_FRAME)

    # -- PUB -------------------------------------------------------------------------------------

    def _process_pub(self, ev: Pub) -> None:
        # The hottest function of a publisher that changes lines (a run of one line is a
        # `PubRun`): fields are read by tuple index (ev[2] is ev.payload, ev[4] ev.line), which
        # skips the property calls; the planned delivery is compiled (server/plans.py).
        payload = ev[2]
        stats = self.stats  # Stats.received, inlined
        stats.in_msgs += 1
        stats.in_bytes += len(payload)
        line = ev[4]
        if (
            line
            and not self._careful_pub
            and self.plans.send(line, payload, self.sublist.genid, self.server.dirty)
        ):
            return
        self._process_pub_slow(ev)

    def _process_acks(self, events: list[Parsed], i: int) -> int:
        """The JetStream acks from `events[i]` on that go to one consumer and nowhere else
        (found by the compiled `PlanCache.ack_run`): handed to its subscription, which takes
        runs, in one call, in order; returns the index after them, or `i` when there is no
        such run. What `_process_pub_slow` and `deliver` would check per message holds for
        the whole run or is checked here (no header, so no trace; no reserved reply; a client
        without mappings or publish permissions to check and not `_careful_pub`), and the
        statistics are counted as they count them. Anything else stops the run and goes the
        usual way."""
        if self.account.mappings is not None or self.perms.publish_restricted:
            return i
        j, target, nbytes = self.plans.ack_run(self.sublist, events, i)
        if target is None or type(target) is not InternalSubscription or target.run is None:
            return i
        acks = cast("list[Pub]", events[i:j])
        stats = self.stats
        stats.in_msgs += len(acks)
        stats.in_bytes += nbytes
        receiver = target.client
        # `deliver`'s checks: an internal receiver has no permissions and no limit on its
        # subscription, and is never this client.
        if target.closed or receiver.closed or target.max_msgs or receiver.perms.watching:
            # Not delivered: what _process_pub_slow does then (no receiver for the reply).
            for ev in acks:
                self._no_receiver(ev)
            return j
        target.delivered += len(acks)
        rstats = receiver.stats
        rstats.out_msgs += len(acks)
        rstats.out_bytes += nbytes
        target.run(target, self, acks)  # type: ignore[arg-type]
        return j

    def _process_run(self, run: PubRun) -> None:
        """Messages repeating one PUB line: once the line has a valid plan, the rest of the
        run goes through it at once (one frame per receiver); until then, one at a time."""
        tails = run.tails
        plans = self.plans
        stats = self.stats
        for i, tail in enumerate(tails):
            if not self._careful_pub and plans.send_run(
                run.line, tails, i, run.size, self.sublist.genid, self.server.dirty
            ):
                stats.in_msgs += len(tails) - i
                stats.in_bytes += (len(tails) - i) * run.size
                return
            # _process_pub without its plan lookup, which just failed: a line with a new
            # reply each time (a JetStream publish) ends up here for every message.
            stats.in_msgs += 1
            stats.in_bytes += run.size
            self._process_pub_slow(run.pub(tail))
            if self.closed:
                return

    def _process_pub_slow(self, ev: Pub, trace: MsgTrace | None = None) -> None:
        if (
            trace is None
            and ev[3] > 0
            and (
                ev[2].find(TRACE_DEST_NEEDLE, 0, ev[3]) >= 0
                or (self._trace_parent and msgtrace.parent_requested(ev))
            )
        ):
            # Message tracing (server/msgtrace.py): the message is processed with a trace
            # that its deliveries report into, then the trace is published; or dropped.
            traced, trace = msgtrace.begin(self, ev)
            if traced is None:
                self.stats.received(-1, -len(ev.payload))  # nats-server never counts it
                return
            if trace is not None:
                self._process_pub_slow(traced, trace)
                trace.send(self)
                return
            ev = traced
        if self.trace:
            self._trace_pub(ev)
        if self.pedantic and not is_valid_literal_subject_bytes(ev.subject):
            self.send_err(errors.INVALID_PUBLISH_SUBJECT)
        mappings = self.account.mappings
        if mappings is not None:
            # The subject mapping hook: from here on `ev` is the message under its mapped
            # subject (a trace reports the mapping as its subject-mapping event).
            ev = self._map_subject(ev, mappings, trace)
        if self.trace:
            self._trace_payload(ev)
        subject: bytes = ev[0]  # tuple indices, not properties: see _process_pub
        ack = subject[:8] == JS_ACK_PREFIX  # a JetStream ack: neither reserved nor planned
        # The reserved subject spaces (server/reserved.py) by their first byte first: this
        # runs for every unplanned publish. (Only a mapping makes a subject empty.)
        # nats-server tests `$NRG.` after the permissions; the refusal reads the same.
        if (
            subject
            and not ack
            and subject[0] in RESERVED_FIRST_BYTES
            and is_reserved_subject(subject, self.account is self.server.system_account)
        ):
            self.publish_violation(subject, trace)
            return
        perms = self.perms
        if perms.publish_restricted and not perms.can_publish(
            subject.decode("utf-8", "surrogateescape")
        ):
            self.publish_violation(subject, trace)
            return
        reply: bytes = ev[1]
        if reply and reply.startswith(RESERVED_REPLY_PREFIXES) and is_reserved_reply(reply):
            self._reply_violation(reply, trace)
            return
        if self.verbose:
            self.outbound.push(OK_FRAME)
        sublist = self.sublist
        # A JetStream ack: a new subject each time, whose result is shared per consumer.
        result = self.plans.match_ack(sublist, subject) if ack else sublist.match_bytes(subject)
        if ev[4] and not self._careful_pub and self._may_plan(subject):  # ev[4]: the PUB line
            # Without receivers too, the line's next messages only counted; but a request
            # that wants "no responders" when nobody gets it is planned only with receivers.
            self.plans.remember(
                self, ev, result, sublist.genid, needs_receiver=bool(reply and self.no_responders)
            )
        if (result.psubs or result.qsubs) and fan_out(self, result, ev, trace):
            return
        self._no_receiver(ev)

    def _no_receiver(self, ev: Pub) -> None:
        """A message nobody received: a request's "no responders" to a client that asked."""
        reply: bytes = ev[1]
        if reply and self.no_responders:
            for sub in self.sublist.match_bytes(reply).psubs:
                if sub.client is self:
                    self.outbound.push(no_responders_frame(reply, sub.sid, ev[0]))
                    break

    def _map_subject(self, ev: Pub, mappings: SubjectMappings, trace: MsgTrace | None) -> Pub:
        """The account's subject mappings (nats-server's selectMappedSubject, applied before
        processInboundClientMsg): `ev` under the subject it maps to, or `ev` itself. A mapping
        that may choose differently next time (weights, `random`) clears the PUB line, so no
        delivery plan remembers the choice."""
        subject = ev.subject
        selected = mappings.select(subject.decode("utf-8", "surrogateescape"))
        if selected is None:
            return ev
        text, fixed = selected
        if trace is not None:
            # Whenever a mapping applies, even onto the subject itself (the share a weighted
            # mapping leaves to its source) or onto nothing (a dropped message), as
            # nats-server reports it.
            trace.subject_mapped(text)
        mapped = text.encode("utf-8", "surrogateescape")
        if self.trace:
            log.log(
                TRACE,
                "%s - <<- [MAPPING %s -> %s]",
                self.label,
                subject.decode(errors="replace"),
                text,
            )
        return make_pub((mapped, ev[1], ev[2], ev[3], ev[4] if fixed else b"", ev[5], ev[6]))

    def publish_violation(self, subject: bytes, trace: MsgTrace | None = None) -> None:
        """Refuse a publish to `subject` (pubPermissionViolation); a trace reports it as its
        ingress error."""
        text = subject.decode("utf-8", "surrogateescape")
        err = errors.permissions_publish(text)
        log.error('%s - Publish Violation - Subject "%s"', self.label, text)
        self.send_err(err)
        if trace is not None:
            trace.ingress_error(err)

    def _reply_violation(self, reply: bytes, trace: MsgTrace | None) -> None:
        """Refuse a publish with a reserved reply subject (replySubjectViolation)."""
        text = reply.decode("utf-8", "surrogateescape")
        err = errors.permissions_publish_reply(text)
        log.error('%s - Publish Violation - Reply "%s"', self.label, text)
        self.send_err(err)
        if trace is not None:
            trace.ingress_error(err)

    def _may_plan(self, subject: bytes) -> bool:
        """A publisher with permissions gets a plan only for subjects its allow/deny lists
        permit (a decision that never changes), never for a reply allowed once by
        allow_responses."""
        perms = self.perms
        return not perms.publish_restricted or perms.allowed_by_rules(
            subject.decode("utf-8", "surrogateescape")
        )

    # -- tracing and errors ----------------------------------------------------------------------

    def _trace_pub(self, ev: Pub) -> None:
        op = "HPUB" if ev.header_size >= 0 else "PUB"
        reply = b" " + ev.reply if ev.reply else b""
        sizes = f"{ev.header_size} {len(ev.payload)}" if ev.header_size >= 0 else len(ev.payload)
        log.log(
            TRACE,
            "%s - <<- [%s %s%s %s]",
            self.label,
            op,
            ev.subject.decode(errors="replace"),
            reply.decode(errors="replace"),
            sizes,
        )

    def _trace_payload(self, ev: Pub) -> None:
        limit = self.server.options.max_traced_msg_len
        data = ev.payload if limit <= 0 else ev.payload[:limit]
        log.log(TRACE, "%s - <<- MSG_PAYLOAD: [%r]", self.label, data.decode(errors="replace"))

    def trace_out(self, head: bytes) -> None:
        """`->> [MSG foo 1 5]`: the control line of a frame sent to this client."""
        line = head.rstrip(b"\r\n").decode("utf-8", "replace")
        log.log(TRACE, "%s - ->> [%s]", self.label, line)

    def send_err(self, text: str) -> None:
        if log.isEnabledFor(TRACE):
            log.log(TRACE, "%s - ->> [-ERR '%s']", self.label, text)
        self.outbound.push(err_frame(text))

    def close_with_error(self, text: str, reason: str) -> None:
        self.outbound.push(err_frame(text))
        self.close(reason)

    def _slow_consumer(self, cause: str) -> None:
        if self.closed:
            return
        if cause == "pending":
            log.info(
                "%s - Slow Consumer Detected: MaxPending of %d Exceeded",
                self.label,
                self.outbound.max_pending,
            )
            reason = CloseReason.SLOW_CONSUMER_PENDING_BYTES
        else:
            log.info(
                "%s - Slow Consumer Detected: WriteDeadline of %s exceeded with %d total bytes.",
                self.label,
                go_duration(self.server.options.write_deadline),
                self.outbound.transport_pending,
            )
            reason = CloseReason.SLOW_CONSUMER_WRITE_DEADLINE
        self.server.stats_slow_consumer()
        self.close(reason, abort=True)

    # -- reporting -------------------------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        return 0 if self.closed else self.outbound.pending_bytes

    @property
    def name(self) -> str:
        return str(self.connect_opts.get("name") or "")

    # -- I/O hooks, implemented by the connection adapter ----------------------------------------

    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN, abort: bool = False) -> None:
        raise NotImplementedError

    def connect_started(self) -> None:
        """A CONNECT arrived: the authentication timer stops."""
        raise NotImplementedError

    def authenticate_off_loop(self, opts: dict[str, Any]) -> None:
        """Run `authenticate` away from the event loop, then `finish_connect`."""
        raise NotImplementedError

    def expire_at(self, when: float, error: str) -> None:
        """Close the connection with `error` ("User Authentication Expired", "Account
        Authentication Expired") when its credentials expire (seconds since the epoch)."""
        raise NotImplementedError
