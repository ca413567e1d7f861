"""Security configuration (accounts, TLS, operator mode) against `nats-server -t`, and the Options
our loader makes of it."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pynatsd.config import ConfigError, load_config, startup_errors
from pynatsd.options import (
    AccountLimits,
    JetStreamAccountLimits,
    ServiceExport,
    ServiceImport,
    StreamExport,
    StreamImport,
)
from support.certs import make_ca, make_cert
from support.jwts import account_jwt, account_key, make_operator, operator_key, user_key
from support.natsserver import NATS_SERVER

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

OP = make_operator()
ACC = account_key()
USER = user_key()


@dataclass
class Case:
    name: str
    text: str
    ok: bool
    # nats-server walks map keys in random order; where that decides the error, positions
    # are not compared.
    order_dependent: bool = False
    files: dict[str, str] = field(default_factory=dict)


ACCOUNTS_OK = f"""
accounts {{
  A: {{
    nkey: {ACC.public}
    users: [
      {{user: a, password: pa}}
      {{user: a2, password: pa, permissions: {{publish: "own.>"}}}}
      {{nkey: {USER.public}}}
    ]
    default_permissions: {{publish: {{allow: "a.>"}}, subscribe: {{deny: "secret"}}}}
    exports: [
      {{stream: "pub.>"}}
      {{stream: "private.>", accounts: [B]}}
      {{service: "help", response: stream, threshold: "5s"}}
      {{service: "svc.*", accounts: [B], response_type: chunked}}
      {{service: "lat", latency: {{sampling: "50%", subject: "lat.results"}}}}
      {{stream: "tok.*.x", account_token_position: 2}}
    ]
    limits: {{max_connections: 10, max_subscriptions: 20, max_payload: 1024, max_leafnodes: 1}}
    jetstream: {{max_mem: 1G, max_file: 2G, max_streams: 5, max_consumers: 6}}
  }}
  B: {{
    users: [{{user: b, password: pb}}]
    imports: [
      {{stream: {{account: A, subject: "pub.>"}}, prefix: froma}}
      {{stream: {{account: A, subject: "private.x"}}, to: "mine.x"}}
      {{service: {{account: A, subject: help}}, to: ahelp}}
      {{service: {{account: A, subject: "svc.one"}}}}
      {{stream: {{account: A, subject: "tok.B.x"}}}}
    ]
    jetstream: enabled
  }}
  C: {{ jetstream: {{ max_memory: -1 }}, limits: {{ max_conn: 1 }} }}
}}
system_account: C
"""

CASES = [
    Case("accounts", ACCOUNTS_OK, True),
    Case("account list", "accounts: [A, B]", True),
    Case("empty account", "accounts { A: {} }", True),
    Case("accounts not a container", "accounts: 5", True),
    Case("reserved account", "accounts { $G: {} }", False),
    Case("reserved in list", 'accounts [A, "$G"]', False),
    Case("duplicate in list", "accounts [A, A]", False),
    Case("account not a map", "accounts { A: 1 }", False),
    Case("unknown account field", "accounts { A: { bogus: 1 } }", False),
    Case("bad account nkey", "accounts { A: { nkey: ABAD } }", False),
    Case("limits unknown", "accounts { A: { limits: { foo: 1 } } }", False),
    Case("limits not a map", "accounts { A: { limits: 5 } }", False),
    Case("jetstream string size", 'accounts { A: { jetstream: { max_mem: "1G" } } }', False),
    Case("jetstream unknown", "accounts { A: { jetstream: { max_mem: 1G, bogus: 1 } } }", False),
    Case("jetstream bad string", "accounts { A: { jetstream: maybe } }", False),
    Case("jetstream disabled", "accounts { A: { jetstream: disabled } }", True),
    Case(
        "import not authorized",
        'accounts { A: { exports: [{stream: "a.>"}] }, '
        'B: { imports: [{stream: {account: A, subject: "b.>"}}] } }',
        False,
    ),
    Case(
        "restricted export",
        "accounts { A: { exports: [{service: x, accounts: [C]}] }, C: {}, "
        "B: { imports: [{service: {account: A, subject: x}}] } }",
        False,
    ),
    Case(
        "import from undefined account",
        "accounts { A: { imports: [{stream: {account: Z, subject: a}}] } }",
        False,
    ),
    Case(
        "export to undefined account",
        'accounts { A: { exports: [{stream: "a", accounts: [Z]}] } }',
        False,
    ),
    Case(
        "wildcard prefix",
        'accounts { A: { imports: [{stream: {account: B, subject: x}, prefix: "p.*"}] }, '
        "B: {exports: [{stream: x}]} }",
        False,
    ),
    Case(
        "import without subject",
        "accounts { A: { imports: [{stream: {account: B}}] }, B: {} }",
        False,
    ),
    Case("bad response type", 'accounts { A: { exports: [{service: "a", response: x}] } }', False),
    Case(
        "response on stream",
        'accounts { A: { exports: [{stream: "a", response: stream}] } }',
        False,
    ),
    Case("latency on stream", 'accounts { A: { exports: [{stream: "a", latency: "x"}] } }', False),
    Case(
        "bad sampling",
        'accounts { A: { exports: [{service: "a", latency: {sampling: 200, subject: x}}] } }',
        False,
    ),
    Case("exports not an array", "accounts { A: { exports: 1 } }", False),
    Case("export item not a map", 'accounts { A: { exports: ["a"] } }', False),
    Case(
        "bad token position",
        'accounts { A: { exports: [{stream: "a.*.b", account_token_position: 1}] } }',
        False,
    ),
    Case(
        "duplicate users across accounts",
        "accounts { A: { users: [{user: a}] }, B: { users: [{user: a}] } }",
        False,
        order_dependent=True,
    ),
    Case(
        "account users and a single user",
        "authorization { user: u, password: p }\naccounts { A: { users: [{user: a}] } }",
        False,
        order_dependent=True,
    ),
    Case(
        "account users and a token",
        "accounts { A: { users: [{user: a}] } }\nauthorization { token: t }",
        False,
        order_dependent=True,
    ),
    Case(
        "account users and authorization users",
        "accounts { A: { users: [{user: a}] } }\nauthorization { users: [{user: b}] }",
        True,
    ),
    Case("system account", "system_account: SYS\naccounts { SYS: {} }", True),
    Case(
        "empty accounts list is public",
        "accounts { A: { exports: [{stream: x, accounts: []}] }, "
        "B: { imports: [{stream: {account: A, subject: x}}] } }",
        True,
    ),
    # TLS
    Case("tls", "tls { cert_file: server.pem, key_file: server-key.pem, timeout: 3 }", True),
    Case(
        "tls verify",
        "tls { cert_file: server.pem, key_file: server-key.pem, ca_file: ca.pem, verify: true,\n"
        ' handshake_first: auto, min_version: "1.3", timeout: "2s",\n'
        ' cipher_suites: ["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"] }',
        True,
    ),
    Case("tls verify_and_map", "tls { verify_and_map: true }", True),
    Case("tls empty", "tls {}", True),
    Case("tls missing key", "tls { cert_file: server.pem }", False),
    Case("tls missing cert", "tls { key_file: server-key.pem }", False),
    Case("tls missing files", "tls { cert_file: x.pem, key_file: y.pem }", False),
    Case(
        "tls bad ca",
        "tls { cert_file: server.pem, key_file: server-key.pem, ca_file: server-key.pem }",
        False,
    ),
    Case("tls unknown field", "tls { foo: 1 }", False),
    Case("tls bad timeout", 'tls { timeout: "x" }', False),
    Case("tls timeout type", "tls { timeout: true }", False),
    Case("tls bad handshake_first", 'tls { handshake_first: "maybe" }', False),
    Case("tls old version", 'tls { min_version: "1.1" }', False),
    Case("tls version spelled out", 'tls { min_version: "TLS1.2" }', False),
    Case("tls unknown cipher", 'tls { cipher_suites: ["nope"] }', False),
    Case("tls insecure cipher", 'tls { cipher_suites: ["TLS_RSA_WITH_RC4_128_SHA"] }', False),
    Case(
        "tls insecure cipher allowed",
        'tls { cipher_suites: ["TLS_RSA_WITH_RC4_128_SHA"], allow_insecure_cipher_suites: true }',
        True,
    ),
    Case("tls verify not a bool", "tls { verify: 1 }", False),
    Case("tls cert not a string", "tls { cert_file: 5 }", False),
    Case("tls not a map", "tls: true", False),
    Case("tls bad pin", 'tls { pinned_certs: ["abc"] }', False),
    Case("tls pin", f'tls {{ pinned_certs: ["{"a" * 64}"] }}', True),
    Case("allow_non_tls", "allow_non_tls: true", True),
    # Operator mode
    Case(
        "operator",
        f"operator: {OP.jwt}\nresolver: MEMORY\n"
        f"resolver_preload {{ {ACC.public}: {account_jwt(OP.signing, ACC)} }}",
        True,
    ),
    Case("operator file", "operator: op.jwt\nresolver: MEM", True, files={"op.jwt": OP.jwt}),
    Case("operator missing file", "operator: nope.jwt", False),
    Case("operator not a jwt", "operator: op.jwt", False, files={"op.jwt": "garbage"}),
    Case("operator list", f"operators: [{OP.jwt}]\nresolver: MEMORY", True),
    Case("preload not a jwt", f"resolver_preload {{ {ACC.public}: x }}", False),
    Case("preload not a map", "resolver_preload: 1", False),
    Case("bad resolver", 'resolver: "foo"', False),
    Case("url resolver", 'resolver: URL("http://localhost:9090/jwt/v1/accounts/")', True),
    Case("resolver full without dir", "resolver: { type: full }", False),
    Case("resolver cache with sync", "resolver: { type: cache, dir: '.', interval: '1m' }", False),
    Case("resolver full", "resolver: { type: full, dir: '.' }", True),
    Case("bad trusted key", 'trusted: "OBAD"', False),
    Case("trusted keys", f"trusted: [{operator_key().public}]", True),
    Case("pinned accounts", f"resolver_pinned_accounts: [{ACC.public}]", True),
]

_POSITION = re.compile(r"([\w.-]+\.conf):(\d+):(\d+):")


def _positions(text: str) -> set[tuple[int, int]]:
    return {(int(line), int(col)) for _, line, col in _POSITION.findall(text)}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    directory = tmp_path_factory.mktemp("conf-pki")
    ca = make_ca()
    server = make_cert(ca, [], dns=("localhost",))
    ca.write(directory, "ca")
    server.write(directory, "server")
    return {p.name: p.read_bytes() for p in directory.iterdir()}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_agrees_with_nats_server(
    case: Case, pki: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, data in pki.items():
        (tmp_path / name).write_bytes(data)
    for name, text in case.files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "main.conf").write_text(case.text)
    real = subprocess.run(
        [str(NATS_SERVER), "-t", "-c", "main.conf"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ),
    )
    output = real.stdout + real.stderr
    assert (real.returncode == 0) is case.ok, output
    monkeypatch.chdir(tmp_path)
    if case.ok:
        loaded = load_config("main.conf")
        assert loaded.warnings == []
        digest = re.search(r"\((sha256:[0-9a-f]+)\)", output)
        assert digest is not None and loaded.digest == digest.group(1)
        return
    with pytest.raises(ConfigError) as info:
        load_config("main.conf")
    if not case.order_dependent:
        assert _positions(str(info.value)) == _positions(output), (str(info.value), output)
        first = output.split(": ", 2)[-1].splitlines()[0]
        assert first in str(info.value), (str(info.value), output)


def test_accounts_options(tmp_path: Path) -> None:
    path = tmp_path / "a.conf"
    path.write_text(ACCOUNTS_OK)
    opts = load_config(path).options
    assert sorted(opts.accounts) == ["A", "B", "C"]
    a, b, c = opts.accounts["A"], opts.accounts["B"], opts.accounts["C"]
    assert a.nkey == ACC.public
    users = {u.username or u.nkey: u for u in opts.users}
    assert {n: u.account for n, u in users.items()} == {
        "a": "A",
        "a2": "A",
        USER.public: "A",
        "b": "B",
    }
    # The account's default permissions fill in for users without their own.
    assert users["a"].permissions == a.default_permissions
    assert users[USER.public].permissions == a.default_permissions
    assert users["a2"].permissions is not None and users["a2"].permissions.publish is not None
    assert users["a2"].permissions.publish.allow == ["own.>"]
    assert users["b"].permissions is None
    assert a.stream_exports == [
        StreamExport("pub.>"),
        StreamExport("private.>", ["B"]),
        StreamExport("tok.*.x", None, 2),
    ]
    assert a.service_exports == [
        ServiceExport("help", response_type="Stream", response_threshold=5.0),
        ServiceExport("svc.*", ["B"], response_type="Chunked"),
        ServiceExport("lat", latency_subject="lat.results", latency_sampling=50),
    ]
    assert b.stream_imports == [
        StreamImport("A", "pub.>", to="froma.pub.>", prefix="froma"),
        StreamImport("A", "private.x", to="mine.x"),
        StreamImport("A", "tok.B.x", to="tok.B.x"),
    ]
    assert b.service_imports == [
        ServiceImport("A", "help", to="ahelp"),
        ServiceImport("A", "svc.one", to="svc.one"),
    ]
    assert a.limits == AccountLimits(10, 20, 1024, 1)
    assert a.jetstream == JetStreamAccountLimits(
        # 1G is 10^9 in the conf format (1GB would be 2^30).
        max_memory=10**9,
        max_store=2 * 10**9,
        max_streams=5,
        max_consumers=6,
    )
    assert b.jetstream == JetStreamAccountLimits()
    assert c.jetstream == JetStreamAccountLimits() and c.limits.max_connections == 1
    assert opts.system_account == "C"
    assert startup_errors(opts) == []


def test_stream_import_with_prefix_and_to(tmp_path: Path) -> None:
    # nats-server only notices when it happens to read `to` after `stream` and `prefix` (its
    # map order is random); we read a file in order.
    path = tmp_path / "p.conf"
    path.write_text(
        "accounts { A: { imports: [{stream: {account: B, subject: x}, prefix: p, to: q}] }, "
        "B: {exports: [{stream: x}]} }"
    )
    with pytest.raises(ConfigError, match="Stream import can not have a 'prefix' and a 'to'"):
        load_config(path)


def test_tls_options(pki: dict[str, bytes], tmp_path: Path) -> None:
    for name, data in pki.items():
        (tmp_path / name).write_bytes(data)
    path = tmp_path / "t.conf"
    path.write_text(
        f"tls {{ cert_file: {tmp_path}/server.pem, key_file: {tmp_path}/server-key.pem,\n"
        f"ca_file: {tmp_path}/ca.pem, verify_and_map: true, timeout: 0.5, first: true }}\n"
    )
    opts = load_config(path).options
    assert opts.tls and opts.tls_verify and opts.tls_map and opts.tls_handshake_first
    assert opts.tls_timeout == 0.5 and opts.auth_timeout == 1.5  # TLS timeout + 1 s
    path.write_text(
        f"authorization {{ timeout: 4 }}\ntls {{ cert_file: {tmp_path}/server.pem, "
        f"key_file: {tmp_path}/server-key.pem, handshake_first: 300ms }}\n"
    )
    opts = load_config(path).options
    assert opts.auth_timeout == 4 and opts.tls_timeout == 2.0
    assert opts.tls_handshake_first and opts.tls_handshake_first_fallback == 0.3


def test_operator_options(tmp_path: Path) -> None:
    path = tmp_path / "o.conf"
    preload = account_jwt(OP.signing, ACC)
    path.write_text(
        f"operator: {OP.jwt}\nresolver: MEMORY\nresolver_preload {{ {ACC.public}: {preload} }}"
    )
    opts = load_config(path).options
    assert opts.operator_jwts == [OP.jwt] and opts.resolver == "MEMORY"
    assert opts.resolver_preload == {ACC.public: preload}
    assert opts.system_account == OP.system.public  # from the operator JWT
    assert startup_errors(opts) == []


STARTUP = [
    ("system_account: Z", "error resolving system account: account missing"),
    (
        f"operators: [{OP.jwt}, {make_operator().jwt}]",
        "operators require an account resolver to be configured",
    ),
    (
        f"operator: {OP.jwt}\nresolver: MEMORY\naccounts {{ A: {{}} }}",
        "operators do not allow Accounts to be configured directly",
    ),
    (
        f"operator: {OP.jwt}\nresolver: MEMORY\nauthorization {{ users: [{{user: a}}] }}",
        "operators do not allow users to be configured directly",
    ),
    (
        f"operator: {OP.jwt}\nresolver: MEMORY\nsystem_account: {ACC.public}",
        "system_account in config and operator JWT must be identical",
    ),
    (
        f"operator: {OP.jwt}\nresolver: MEMORY\nno_auth_user: x",
        "no_auth_user not compatible with Trusted Operator",
    ),
    ("no_auth_user: x", 'no_auth_user: "x" present, but users/nkeys are not defined'),
    (
        "accounts { A: { users: [{user: a}] } }\nno_auth_user: b",
        'no_auth_user: "b" not present as user or nkey in authorization block or account '
        "configuration",
    ),
]


@pytest.mark.parametrize(("text", "error"), STARTUP)
def test_startup_errors_like_nats_server(text: str, error: str, tmp_path: Path) -> None:
    path = tmp_path / "s.conf"
    path.write_text(text + "\nport: -1\n")
    real = subprocess.run(
        [str(NATS_SERVER), "-c", str(path)], capture_output=True, text=True, timeout=10
    )
    assert real.returncode != 0 and error in real.stderr, real.stderr
    assert startup_errors(load_config(path).options) == [error]
