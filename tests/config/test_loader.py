"""From parsed configuration to Options: key names, aliases, types, errors, warnings."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from pynatsd.config import (
    ConfigError,
    ConfigErrors,
    apply_config,
    check_config,
    load_config,
    load_options,
    parse,
    parse_nodes,
    startup_errors,
)
from pynatsd.gofmt import go_duration_ns as format_go_duration
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import Options, Permissions, ResponsePermission, SubjectPermission, User

USER_NKEY = "UAB2CB576PHBBPQ5ODORRZ2LYCMWPZGWGCN2KDK7DXOIMZASKUY3RLKK"


def load(text: str) -> tuple[Options, list[str]]:
    opts = Options()
    warnings = apply_config(opts, parse_nodes(text, "t.conf"), "t.conf")
    return opts, warnings


def load_error(text: str) -> ConfigErrors:
    with pytest.raises(ConfigErrors) as info:
        load(text)
    return info.value


KEY_CASES: list[tuple[str, str, Any]] = [
    ("listen: 4333", "port", 4333),
    ("listen: 127.0.0.1:4333", "host", "127.0.0.1"),
    ("listen: '[::1]:4333'", "host", "::1"),
    ("listen: ':4333'", "host", "0.0.0.0"),
    ("client_advertise: 'nats.example:4222'", "client_advertise", "nats.example:4222"),
    ("port: 4333", "port", 4333),
    ("port: -1", "port", -1),
    ("PORT: 4333", "port", 4333),
    ("server_name: n1", "server_name", "n1"),
    ("host: 127.0.0.1", "host", "127.0.0.1"),
    ("net: 127.0.0.1", "host", "127.0.0.1"),
    ("debug: true", "debug", True),
    ("trace: yes", "trace", True),
    ("trace_verbose: true", "trace", True),
    ("trace_verbose: true", "trace_verbose", True),
    ("trace_headers: true", "trace_headers", True),
    ("trace_headers: true", "trace", True),
    ("logtime: false", "logtime", False),
    ("logtime_utc: true", "logtime_utc", True),
    ("disable_sublist_cache: true", "disable_sublist_cache", True),
    ("no_sublist_cache: true", "disable_sublist_cache", True),
    ("http: 8222", "http_port", 8222),
    ("http: 127.0.0.1:8222", "http_host", "127.0.0.1"),
    ("http: 127.0.0.1:8222", "http_port", 8222),
    ("http_port: 8222", "http_port", 8222),
    ("monitor_port: 8222", "http_port", 8222),
    ("https: 8443", "https_port", 8443),
    ("https: 127.0.0.1:8443", "http_host", "127.0.0.1"),
    ("https: 127.0.0.1:8443", "https_port", 8443),
    ("https_port: 8443", "https_port", 8443),
    ("http_base_path: /nats", "http_base_path", "/nats"),
    ("max_payload: 2MB", "max_payload", 2 << 20),
    ("max_pending: 128MB", "max_pending", 128 << 20),
    ("max_control_line: 8KB", "max_control_line", 8192),
    ("max_connections: 100", "max_connections", 100),
    ("max_conn: 100", "max_connections", 100),
    ("max_connections: 0", "max_connections", -1),
    ("max_subscriptions: 10", "max_subscriptions", 10),
    ("max_subs: 10", "max_subscriptions", 10),
    ("max_sub_tokens: 16", "max_sub_tokens", 16),
    ("max_subscription_tokens: 255", "max_sub_tokens", 255),
    ("ping_interval: '30s'", "ping_interval", 30.0),
    ("ping_interval: '1h30m'", "ping_interval", 5400.0),
    ("ping_interval: 5", "ping_interval", 5.0),
    ("ping_max: 5", "ping_max", 5),
    ("write_deadline: '1.5s'", "write_deadline", 1.5),
    ("write_deadline: '250ms'", "write_deadline", 0.25),
    ("write_timeout: close", "write_timeout", "close"),
    ("server_tags: ['Region:EU', ' az:1 ', 'region:eu', '']", "server_tags", ["region:eu", "az:1"]),
    ("server_tags: single", "server_tags", ["single"]),
    ("server_metadata: {a: b}", "server_metadata", {"a": "b"}),
    ("lame_duck_duration: '45s'", "lame_duck_duration", 45.0),
    ("lame_duck_grace_period: '5s'", "lame_duck_grace_period", 5.0),
    ("no_header_support: true", "no_header_support", True),
    ("logfile: /tmp/n.log", "log_file", "/tmp/n.log"),
    ("log_file: /tmp/n.log", "log_file", "/tmp/n.log"),
    ("logfile_size_limit: 1MB", "log_size_limit", 1 << 20),
    ("log_size_limit: 10", "log_size_limit", 10),
    ("logfile_max_num: 3", "log_max_num", 3),
    ("log_max_num: 3", "log_max_num", 3),
    ("syslog: true", "syslog", True),
    ("remote_syslog: 'udp://127.0.0.1:514'", "remote_syslog", "udp://127.0.0.1:514"),
    ("pid_file: /tmp/n.pid", "pid_file", "/tmp/n.pid"),
    ("pidfile: /tmp/n.pid", "pid_file", "/tmp/n.pid"),
    ("ports_file_dir: /tmp", "ports_file_dir", "/tmp"),
    ("max_closed_clients: 5", "max_closed_clients", 5),
    ("max_traced_msg_len: 64", "max_traced_msg_len", 64),
    ("no_auth_user: bob", "no_auth_user", "bob"),
    ("system_account: SYS", "system_account", "SYS"),
    ("system: SYS", "system_account", "SYS"),
    ("no_system_account: true", "no_system_account", True),
    ("no_sys_acc: true", "no_system_account", True),
    ("connect_error_reports: 10", "connect_error_reports", 10),
    ("reconnect_error_reports: 2", "reconnect_error_reports", 2),
    ("no_fast_producer_stall: true", "no_fast_producer_stall", True),
    ("store_dir: /data", "store_dir", "/data"),
    ("storedir: /data", "store_dir", "/data"),
    ("jetstream: true", "jetstream", True),
    ("jetstream: enabled", "jetstream", True),
    ("jetstream: Disabled", "jetstream", False),
    ("jetstream { store_dir: /data }", "jetstream", True),
    ("jetstream { store_dir: /data }", "store_dir", "/data"),
    ("jetstream { enabled: false }", "jetstream", False),
    ("jetstream { max_mem: 1G }", "jetstream_max_memory", 10**9),
    ("jetstream { max_mem: '1G' }", "jetstream_max_memory", 1 << 30),
    ("jetstream { max_memory_store: 1GB }", "jetstream_max_memory", 1 << 30),
    ("jetstream { max_file_store: '2G' }", "jetstream_max_store", 2 << 30),
    ("jetstream { max_file: 1000 }", "jetstream_max_store", 1000),
    ("jetstream { domain: hub }", "jetstream_domain", "hub"),
    ("jetstream { strict: false }", "jetstream_strict", False),
    ("jetstream { sync_interval: '10s' }", "jetstream_sync_interval", 10.0),
    ("jetstream { sync: always }", "jetstream_sync_always", True),
    ("jetstream { unique_tag: ' AZ ' }", "jetstream_unique_tag", "az"),
    ("authorization { user: a, password: b }", "username", "a"),
    ("authorization { username: a, pass: b }", "password", "b"),
    ("authorization { token: s3cr3t }", "authorization", "s3cr3t"),
    ("authorization { token: t, timeout: 5 }", "auth_timeout", 5.0),
    ("authorization { token: t, timeout: 0.5 }", "auth_timeout", 0.5),
    ("authorization { token: t, timeout: '3s' }", "auth_timeout", 3.0),
    ("authorization { token: t }", "auth_timeout", 2.0),
]


@pytest.mark.parametrize(("text", "attribute", "expected"), KEY_CASES)
def test_key_sets_option(text: str, attribute: str, expected: Any) -> None:
    opts, _ = load(text)
    assert getattr(opts, attribute) == expected


def test_defaults_untouched_by_empty_map() -> None:
    opts = Options()
    apply_config(opts, {})
    assert opts == Options()


def test_users_and_permissions() -> None:
    opts, _ = load(
        f"""
        authorization {{
          default_permissions {{ publish: "pub.>" }}
          users: [
            {{ user: alice, password: pw, permissions: {{
                publish: {{ allow: ["a.>"], deny: "a.secret" }}
                subscribe: ["_INBOX.>", "jobs workers"]
                allow_responses: {{ max: 3, expires: "1m" }}
            }} }}
            {{ user: bob, password: pw2, allowed_connection_types: ["standard", "WebSocket"] }}
            {{ nkey: {USER_NKEY} }}
          ]
        }}
        """
    )
    alice, bob, nkey_user = opts.users
    assert alice == User(
        "alice",
        "pw",
        permissions=Permissions(
            publish=SubjectPermission(allow=["a.>"], deny=["a.secret"]),
            subscribe=SubjectPermission(allow=["_INBOX.>", "jobs workers"]),
            response=ResponsePermission(max_msgs=3, expires=60.0),
        ),
    )
    default = Permissions(publish=SubjectPermission(allow=["pub.>"]))
    assert bob.permissions == default
    assert bob.allowed_connection_types == {"STANDARD", "WEBSOCKET"}
    assert nkey_user.nkey == USER_NKEY and nkey_user.permissions == default
    assert opts.auth_required


def test_allow_responses_true_turns_off_blanket_publish() -> None:
    opts, _ = load("authorization { users: [{user: a, permissions: {allow_responses: true}}] }")
    perms = opts.users[0].permissions
    assert perms == Permissions(
        publish=SubjectPermission(allow=[]), response=ResponsePermission(1, 120.0)
    )


def test_lookup_is_case_insensitive_for_nested_keys() -> None:
    opts, _ = load("Authorization { USER: a, Password: b }")
    assert (opts.username, opts.password) == ("a", "b")


ERROR_CASES = [
    ("port: 'abc'", '"port" must be an integer, got string ("abc")', "1:0"),
    ("\n  debug: 1", '"debug" must be a boolean, got int64 (1)', "2:3"),
    ("max_payload: 1.5", '"max_payload" must be an integer, got float64 (1.5)', "1:0"),
    ("foo: 1", 'unknown field "foo"', "1:0"),
    ("port: 4222\nfoo_bar = 1", 'unknown field "foo_bar"', "2:1"),
    (
        "lame_duck_duration: '10s'",
        "invalid lame_duck_duration of 10s, minimum is 30 seconds",
        "1:0",
    ),
    ("lame_duck_duration: 60", '"lame_duck_duration" must be a string', "1:0"),
    (
        "lame_duck_grace_period: '-1s'",
        "invalid lame_duck_grace_period, needs to be positive",
        "1:0",
    ),
    ("ping_interval: 'abc'", 'error parsing ping_interval: time: invalid duration "abc"', "1:0"),
    ("write_deadline: '1.5'", 'time: missing unit in duration "1.5"', "1:0"),
    ("write_deadline: '1x'", 'time: unknown unit "x" in duration "1x"', "1:0"),
    ("write_timeout: sometimes", "write_timeout must be 'default', 'close' or 'retry'", "1:0"),
    ("max_sub_tokens: 300", "max_sub_tokens value is too big", "1:0"),
    ("max_sub_tokens: 0", "max_sub_tokens value can not be negative", "1:0"),
    ("max_payload: 3GB", "max_payload value is too big", "1:0"),
    ("max_control_line: 3GB", "max_control_line value is too big", "1:0"),
    ("server_name: 'a b'", "server name cannot contain spaces", "1:0"),
    ("listen: 'nope'", 'could not parse address string "nope"', "1:0"),
    ("listen: 'h:p'", 'could not parse port "p"', "1:0"),
    ("listen: true", "expected port or host:port, got bool", "1:0"),
    ("http: [1,]", "expected port or host:port, got []interface {}", "1:0"),
    ("store_dir: a\njetstream { store_dir: b }", "Duplicate 'store_dir' configuration", "2:13"),
    ("jetstream: maybe", "Expected 'enabled' or 'disabled' for string value, got 'maybe'", "1:0"),
    ("jetstream: 1", "Expected map, bool or string to define JetStream, got int64", "1:0"),
    (
        "jetstream { max_mem: 1X }",
        "max_mem_store sizes defined as strings must end in K, M, G, T",
        "1:12",
    ),
    ("jetstream { max_file: true }", "max_file_store must be int64 or string", "1:12"),
    ("jetstream { bogus: 1 }", 'unknown field "bogus"', "1:12"),
    (
        "server_tags: [1,]",
        "error parsing tags: unsupported type int64 where string is expected",
        "1:14",
    ),
    ("server_metadata: {a: 1}", '"a" must be a string, got int64 (1)', "1:18"),
    ("system_account: 1", "system account name must be a string", "1:0"),
    ("authorization: 1", '"authorization" must be a map', "1:0"),
    ("authorization { user: a, token: t }", "Cannot have a user/pass and token", "1:0"),
    (
        "authorization { user: a, users: [] }",
        "Can not have a single user/pass and a users array",
        "1:0",
    ),
    ("authorization { token: t, users: [] }", "Can not have a token and a users array", "1:0"),
    ("authorization { users: [{user: a}, {user: a}] }", 'Duplicate user "a" detected', "1:0"),
    ("authorization { users: [{password: x}] }", "User entry requires a user", "1:25"),
    ("authorization { users: [{nkey: UBAD}] }", "Not a valid public nkey for a user", "1:25"),
    (
        f"authorization {{ users: [{{nkey: {USER_NKEY}, user: x}}] }}",
        "Nkey users do not take usernames or passwords",
        "1:",
    ),
    ("authorization { users: 5 }", "Expected users field to be an array, got 5", "1:16"),
    ("authorization { users: [5,] }", "Expected user entry to be a map/struct, got 5", "1:24"),
    ("authorization { bogus: 1 }", 'unknown field "bogus"', "1:16"),
    ("authorization { timeout: true }", "'timeout' wrong type", "1:16"),
    ("authorization { timeout: 'x' }", "'timeout' time: invalid duration", "1:16"),
    (
        "authorization { users: [{user: a, permissions: {publish: {allow: 'a b'}}}] }",
        'subject "a b" is not a valid subject',
        "1:58",
    ),
    (
        "authorization { users: [{user: a, permissions: {subscribe: 'a b c'}}] }",
        'subject "a b c" is not a valid subject',
        None,  # nats-server names no position for a bare list
    ),
    (
        "authorization { users: [{user: a, permissions: {subscribe: 'a.> b..c'}}] }",
        'queue "b..c" is not a valid queue',
        None,  # nats-server names no position for a bare list
    ),
    (
        "authorization { users: [{user: a, permissions: {pub: [1,]}}] }",
        "Subject in permissions array cannot be cast to string",
        "1:54",
    ),
    (
        "authorization { users: [{user: a, permissions: {pub: {allowed: x}}}] }",
        'Unknown field name "allowed" parsing subject permissions',
        "1:54",
    ),
    (
        "authorization { users: [{user: a, permissions: {push: x}}] }",
        'Unknown field "push" parsing permissions',
        "1:48",
    ),
    (
        "authorization { users: [{user: a, permissions: 5}] }",
        "Expected permissions to be a map/struct, got 5",
        "1:34",
    ),
    (
        "authorization { users: [{user: a, clients: [foo]}] }",
        'invalid connection types ["FOO"]',
        "1:34",
    ),
    (
        "authorization { users: [{user: a, permissions: {allow_responses: {expires: 5}}}] }",
        "error parsing expires, not a duration string",
        "1:",
    ),
]


@pytest.mark.parametrize(("text", "message", "position"), ERROR_CASES)
def test_errors_name_the_position(text: str, message: str, position: str | None) -> None:
    err = load_error(text)
    lines = str(err).splitlines()
    if position is None:
        assert message in lines, lines
        return
    assert any(line.startswith(f"t.conf:{position}") and message in line for line in lines), lines


def test_all_errors_are_reported_together() -> None:
    err = load_error("port: x\ndebug: 1\nfoo: 2")
    assert len(err.errors) == 3
    assert [e.line for e in err.errors] == [1, 2, 3]
    assert isinstance(err, ConfigError)


def test_unknown_key_used_as_variable_is_allowed() -> None:
    opts, warnings = load("my_port = 4333\nport = $my_port")
    assert opts.port == 4333 and warnings == []


def test_unknown_nested_key_used_as_variable_is_allowed() -> None:
    opts, _ = load("authorization { PASS = x, user = a, password = $PASS }")
    assert opts.password == "x"


WARNING_CASES = [
    ("ping_interval: 5", 't.conf:1:0: invalid use of field "ping_interval": ping_interval should'),
    ("write_deadline: 5", 't.conf:1:0: invalid use of field "write_deadline"'),
    ("jetstream { sync: 5 }", 't.conf:1:12: invalid use of field "sync"'),
    ("authorization { token: t, timeout: 120 }", "timeout of 120 (120.000000 seconds) is high"),
    ("# nothing", "t.conf: config has no values or is empty"),
]


@pytest.mark.parametrize(("text", "warning"), WARNING_CASES)
def test_warnings(text: str, warning: str) -> None:
    _, warnings = load(text)
    assert len(warnings) == 1 and warning in warnings[0]


@pytest.mark.parametrize(
    "text",
    [
        "websocket { port: 8080, jwt_cookie: x }",
        # tls, accounts, operator and resolver are supported now (tests/config/test_security*).
        "ocsp: false",
        "resolver_tls { cert_file: x }",
        "prof_port: 6060",
        "jetstream { limits { max_ha_assets: 1 } }",
        "authorization { auth_callout { issuer: x } }",
    ],
)
def test_unsupported_keys_are_ignored_with_a_warning(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="pynatsd.config"):
        _, warnings = load(text)
    assert warnings == []  # not a config warning: `-t` must still pass
    assert "not supported by pynatsd" in caplog.text


def test_load_config_file(tmp_path: Path) -> None:
    path = tmp_path / "n.conf"
    path.write_text("port: 4333\nping_interval: 5\nprof_port: 6060\n")
    loaded = load_config(path)
    assert loaded.options.port == 4333
    assert loaded.options.config_file == str(path)
    assert loaded.ignored == ["prof_port"]
    assert loaded.digest.startswith("sha256:")
    assert len(loaded.warnings) == 1
    opts, warnings = load_options(path)
    assert opts.port == 4333 and warnings == loaded.warnings
    with pytest.raises(ConfigErrors) as info:
        check_config(path)
    assert "ping_interval should be converted to a duration" in str(info.value)


def test_load_config_reports_file_positions(tmp_path: Path) -> None:
    (tmp_path / "inc.conf").write_text("\n\n  port: nope\n")
    path = tmp_path / "n.conf"
    path.write_text("include inc.conf\n")
    with pytest.raises(ConfigErrors, match=r"inc\.conf:3:3: \"port\" must be an integer"):
        load_config(path)


def test_apply_config_accepts_plain_values() -> None:
    opts = Options()
    apply_config(opts, parse("port: 1234\nauthorization { token: t }"))
    assert (opts.port, opts.authorization) == (1234, "t")


def test_startup_errors() -> None:
    opts = Options(max_payload=10, max_pending=5, no_auth_user="x")
    opts.lame_duck_grace_period = opts.lame_duck_duration
    problems = startup_errors(opts)
    assert len(problems) == 3
    assert problems[1] == "max_payload (10) cannot be higher than max_pending (5)"
    opts.users = [User("y")]
    assert "not present as user or nkey" in startup_errors(opts)[2]
    assert startup_errors(Options()) == []


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("0", 0),
        ("2m", 120 * 10**9),
        ("1.5s", 1_500_000_000),
        ("1h30m", 5400 * 10**9),
        ("-1.5h", -5400 * 10**9),
        ("+5s", 5 * 10**9),
        (".5s", 500_000_000),
        ("5.s", 5 * 10**9),
        ("300ms", 300_000_000),
        ("10us", 10_000),
        ("10µs", 10_000),
        ("10μs", 10_000),
        ("7ns", 7),
        ("1h1m1s1ms1us1ns", 3661001001001),
        ("2562047h47m16.854775807s", (1 << 63) - 1),
    ],
)
def test_parse_go_duration(text: str, nanos: int) -> None:
    assert parse_go_duration(text) == nanos


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("1", 'time: missing unit in duration "1"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("s", 'time: invalid duration "s"'),
        (".s", 'time: invalid duration ".s"'),
        ("1s2", 'time: missing unit in duration "1s2"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
    ],
)
def test_parse_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_go_duration(text)


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (2_000_000, "2ms"),
        (10 * 10**9, "10s"),
        (1_500_000_000, "1.5s"),
        (90 * 10**9, "1m30s"),
        (3600 * 10**9, "1h0m0s"),
        (-29 * 10**9, "-29s"),
    ],
)
def test_format_go_duration(nanos: int, text: str) -> None:
    assert format_go_duration(nanos) == text


def test_websocket_block(tmp_path: Path) -> None:
    conf = tmp_path / "ws.conf"
    conf.write_text("websocket { listen: '127.0.0.1:9080', no_tls: true, compression: true }\n")
    opts = load_config(conf).options
    assert (opts.websocket_host, opts.websocket_port) == ("127.0.0.1", 9080)
    assert opts.websocket_no_tls and opts.websocket_compression
