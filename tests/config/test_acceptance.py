"""Differential test: every config in the matrix goes through `nats-server -t -c` and our loader.

Both must agree: accepted (and then with the same digest), rejected for a warning only (`-t`
treats warnings as errors; our loader must report the warning and still load), or rejected. Where
nats-server names positions (`file:line:col:`), ours must name the same ones.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pynatsd.config import ConfigError, check_config, load_config
from support.natsserver import nats_server_binary

USER_NKEY = "UAB2CB576PHBBPQ5ODORRZ2LYCMWPZGWGCN2KDK7DXOIMZASKUY3RLKK"
BCRYPT = "$2a$11$PWIFAL8RsWyGI3jVZtO9Nu8.6jOxzxfZo7c/W0eLk017hjgUKWrhy"


NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")


@dataclass
class Case:
    name: str
    text: str
    outcome: str  # "ok", "warn" (only -t rejects it) or "error"
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # nats-server walks keys in random (Go map) order; where that decides which of two keys is
    # blamed, positions are not compared.
    order_dependent: bool = False


CASES = [
    Case("port", "port: 4222", "ok"),
    Case(
        "server basics",
        """
        # A typical server
        listen: 127.0.0.1:4333
        http: "127.0.0.1:8333"
        server_name: "n1"
        max_payload: 2MB
        max_pending: 128MB
        max_control_line: 8KB
        max_connections: 1000
        max_subscriptions: 100
        max_sub_tokens: 32
        ping_interval: "30s"
        ping_max: 3
        write_deadline: "2s"
        lame_duck_duration: "40s"
        lame_duck_grace_period: "5s"
        debug: false; trace: false, logtime: true
        logtime_utc: yes
        no_header_support: off
        disable_sublist_cache: on
        max_closed_clients: 100
        max_traced_msg_len: 1024
        """,
        "ok",
    ),
    Case("aliases", "net: 0.0.0.0\nmonitor_port: 8222\nmax_conn: 0\nmax_subs: 5", "ok"),
    Case("case insensitive keys", "PORT: 4222\nDebug: true", "ok"),
    Case("separators", "port 4222\ndebug = true\ntrace: false", "ok"),
    Case("key and value on separate lines", "port\n  4222\n", "ok"),
    Case(
        "json style",
        '{\n  "port": 4222,\n  "http_port": 8222,\n  "write_deadline": "1h"\n}\n',
        "ok",
    ),
    Case("nested blocks", "{\n  {\n    port: 4222 // c\n  }\n  # x\n}\n", "ok"),
    Case(
        "authorization users",
        f"""
        authorization {{
          default_permissions: {{ publish: "pub.>", subscribe: ["_INBOX.>", "q.* workers"] }}
          timeout: 0.5
          users = [
            {{user: alice, password: "{BCRYPT}"}}
            {{user: bob, password: pw, permissions: {{publish: {{allow: ["a.>"], deny: "a.x"}},
               allow_responses: {{max: 2, expires: "1m"}}}}}}
            {{nkey: {USER_NKEY}}}
          ]
        }}
        no_auth_user: bob
        """,
        "ok",
    ),
    Case("bare bcrypt password", f"authorization {{ user: a, password: {BCRYPT} }}", "ok"),
    Case("token", "authorization { token: s3cr3t, timeout: 3 }", "ok"),
    Case(
        "jetstream block",
        "jetstream {\n store_dir: '/tmp/js'\n max_mem: 1G\n max_file: '10G'\n}",
        "ok",
    ),
    Case("jetstream enabled", "jetstream: enabled", "ok"),
    Case("server tags and metadata", "server_tags: [a, 'B ', c]\nserver_metadata { k: v }", "ok"),
    Case("raw block", "pid_file (\n/tmp/nats.pid\n)\n", "ok"),
    Case("raw block at eof", "pid_file (\n/tmp/nats.pid\n)", "ok"),
    Case("escapes", 'pid_file: "a\\tb\\x41\\\\c\\"d<&>"', "ok"),
    Case(
        "variables",
        "p = 4333\nport: $p\nauthorization { u = bob, user: $u, pass: $p2 }\np2 = x",
        "error",
    ),
    Case(
        "variable scopes",
        "name = outer\nauthorization {\n  name = inner\n  user: $name\n  password: pw\n}\n"
        "server_name: $name",
        "ok",
    ),
    Case("environment variable", "port: $PYNATSD_ACC_PORT", "ok", env={"PYNATSD_ACC_PORT": "4333"}),
    Case(
        "environment map",
        "authorization: $PYNATSD_ACC_AUTH",
        "ok",
        env={"PYNATSD_ACC_AUTH": "{ user: a, password: b }"},
    ),
    Case("unknown key used as variable", "my_port = 4333\nport = $my_port", "ok"),
    Case(
        "include",
        "include ./inc/limits.conf\nauthorization {\n  include 'inc/auth.conf'\n}\n",
        "ok",
        files={"inc/limits.conf": "max_payload: 1MB\n", "inc/auth.conf": "user: a\npassword: b\n"},
    ),
    Case(
        "nested include",
        'include "inc/a.conf"',
        "ok",
        files={"inc/a.conf": "include b.conf\n", "inc/b.conf": "port: 4333\n"},
    ),
    Case("unsupported but valid", "cluster { name: c, port: -1 }\naccounts { A: {} }", "ok"),
    Case("mappings", 'mappings { "a.*": "b.{{wildcard(1)}}" }', "ok"),
    Case("comments everywhere", "# a\nport: 4222 # b\n// c\ndebug: true // d\n", "ok"),
    # -t fails on warnings only.
    Case("ping interval as integer", "ping_interval: 5", "warn"),
    Case("write deadline as integer", "write_deadline: 10", "warn"),
    Case("empty file", "", "warn"),
    Case("comments only", "# nothing here\n", "warn"),
    Case("long auth timeout", "authorization { token: t, timeout: 120 }", "warn"),
    # Errors.
    Case("unterminated map", "authorization {\n  user: a\n", "error"),
    Case("unterminated string", 'server_name: "abc\n', "error"),
    Case("unterminated array", "server_tags: [a, b\n", "error"),
    Case("unterminated raw block", "pid_file (\nabc\n", "error"),
    Case("integer before bracket", "server_tags: [1, 2]", "error"),
    Case("key without value", "port", "error"),
    Case("brace glued to key", "authorization{\n user: a\n}", "error"),
    Case("unknown key", "port: 4222\nfoo_bar: 1", "error"),
    Case("unknown nested key", "authorization { nope: 1 }", "error"),
    Case("wrong type", "port: 'abc'", "error"),
    Case("wrong type bool", "debug: 1", "error"),
    Case("float for integer", "max_payload: 1.5", "error"),
    Case("lame duck too short", "lame_duck_duration: '10s'", "error"),
    Case("lame duck as integer", "lame_duck_duration: 60", "error"),
    Case("bad duration", "ping_interval: '5 seconds'", "error"),
    Case("missing variable", "port: $PYNATSD_ACC_NOT_SET", "error"),
    Case(
        "environment cycle",
        "port: $PYNATSD_ACC_A",
        "error",
        env={"PYNATSD_ACC_A": "$PYNATSD_ACC_B", "PYNATSD_ACC_B": "$PYNATSD_ACC_A"},
    ),
    Case("missing include", "include 'nope.conf'", "error"),
    Case("bad include", "include 'bad.conf'", "error", files={"bad.conf": "x { "}),
    Case("too many sub tokens", "max_sub_tokens: 300", "error"),
    Case("server name with spaces", "server_name: 'a b'", "error"),
    Case("user and token", "authorization { user: a, token: t }", "error"),
    Case("duplicate users", "authorization { users: [{user: a}, {user: a}] }", "error"),
    Case("bad nkey", "authorization { users: [{nkey: UBAD}] }", "error"),
    Case("bad subject", "authorization { users: [{user: a, permissions: {pub: 'a b'}}] }", "error"),
    Case(
        "duplicate store_dir",
        "store_dir: a\njetstream { store_dir: b }",
        "error",
        order_dependent=True,
    ),
    Case("jetstream unknown key", "jetstream { bogus: 1 }", "error"),
    Case("bad listen", "listen: 'nope'", "error"),
    Case("several errors", "port: x\ndebug: 1\nfoo: 2\n", "error"),
    Case("integer out of range", "max_pending: 99999999999999999999", "error"),
    Case("bad date", "x = 2016-13-01T00:00:00Z\nport: 4222", "error"),
    Case(
        "error in included file", "include inc.conf", "error", files={"inc.conf": "\n  port: x\n"}
    ),
    Case(
        "account msg_trace",
        'accounts { A { msg_trace: {dest: "a.trace", sampling: "25%"} }, B { trace_dest: b.t } }',
        "ok",
    ),
    Case("account msg_trace bad dest", 'accounts { A { msg_trace: "a.*" } }', "error"),
    Case(
        "account msg_trace sampling",
        "accounts { A { msg_trace: {dest: a, sampling: 0} } }",
        "error",
    ),
    Case("account msg_trace sampling text", "accounts { A { msg_trace: {sampling: x} } }", "error"),
    Case("account msg_trace unknown", "accounts { A { msg_trace: {dest: a, x: 1} } }", "error"),
    Case("account msg_trace type", "accounts { A { msg_trace: 1 } }", "error"),
]

_POSITION = re.compile(r"([\w.-]+\.conf):(\d+):(\d+):")
_PARSE_ERROR_LINE = re.compile(r"Parse error on line (\d+)")


def _write(root: Path, case: Case) -> Path:
    for name, text in case.files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    path = root / "main.conf"
    path.write_text(case.text)
    return path


def _positions(text: str) -> set[tuple[str, int, int]]:
    return {(Path(f).name, int(line), int(col)) for f, line, col in _POSITION.findall(text)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_agrees_with_nats_server(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, case)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    assert NATS_SERVER is not None
    real = subprocess.run(
        [NATS_SERVER, "-t", "-c", "main.conf"],
        cwd=tmp_path,
        env={**os.environ, **case.env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    real_output = real.stdout + real.stderr
    real_outcome = "ok" if real.returncode == 0 else "rejected"
    assert real_outcome == ("ok" if case.outcome == "ok" else "rejected"), real_output

    monkeypatch.chdir(tmp_path)
    if case.outcome == "error":
        with pytest.raises(ConfigError) as info:
            load_config("main.conf")
        ours = str(info.value)
        if case.order_dependent:
            return
        if _positions(real_output):
            assert _positions(ours) == _positions(real_output), (ours, real_output)
        elif m := _PARSE_ERROR_LINE.search(real_output):
            assert f":{m.group(1)}:" in ours, (ours, real_output)
        return

    loaded = load_config("main.conf")
    if case.outcome == "warn":
        assert loaded.warnings, real_output
        assert "invalid use of field" in real_output or "no values" in real_output
        assert _positions(" ".join(loaded.warnings)) == _positions(real_output)
        with pytest.raises(ConfigError):
            check_config("main.conf")
        return

    assert loaded.warnings == []
    check_config("main.conf")
    digest = re.search(r"\((sha256:[0-9a-f]+)\)", real_output)
    assert digest is not None, real_output
    assert loaded.digest == digest.group(1)


def test_include_cycle_is_reported(tmp_path: Path) -> None:
    # nats-server recurses until it crashes here; we report the cycle.
    (tmp_path / "a.conf").write_text("include b.conf\n")
    (tmp_path / "b.conf").write_text("include a.conf\n")
    with pytest.raises(ConfigError, match="include cycle"):
        load_config(tmp_path / "a.conf")
