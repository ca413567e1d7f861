"""The conf syntax: lexer items, parsed values, errors, includes, variables, digests.

Expected items and positions come from nats-server's conf/lex_test.go and conf/parse_test.go, so
these tables also pin our behaviour to the real server's.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pynatsd.config import ConfigError, config_digest, parse, parse_file, parse_file_nodes
from pynatsd.config.lexer import ItemKind, lex
from pynatsd.config.parser import go_join, parse_nodes

K = ItemKind


def items(text: str) -> list[tuple[ItemKind, str, int, int]]:
    """The lexer's items up to (without) EOF; an ERROR item ends the list."""
    out = []
    for item in lex(text.encode()):
        if item.kind is K.EOF:
            break
        if item.kind in (K.COMMENT_START, K.TEXT):
            continue
        out.append(tuple(item))
        if item.kind is K.ERROR:
            break
    return out  # type: ignore[return-value]


LEX_CASES = [
    ("foo", [(K.KEY, "foo", 1, 0)]),
    ('foo = "bar"', [(K.KEY, "foo", 1, 0), (K.STRING, "bar", 1, 7)]),
    ("foo = 'bar'", [(K.KEY, "foo", 1, 0), (K.STRING, "bar", 1, 7)]),
    ("foo='bar'\r\n", [(K.KEY, "foo", 1, 0), (K.STRING, "bar", 1, 5)]),
    ("foo=\t'bar'\t", [(K.KEY, "foo", 1, 0), (K.STRING, "bar", 1, 6)]),
    ("foo = 'bar\\r\\n  \\t'", [(K.KEY, "foo", 1, 0), (K.STRING, "bar\\r\\n  \\t", 1, 7)]),
    ("foo = 3xyz", [(K.KEY, "foo", 1, 0), (K.STRING, "3xyz", 1, 6)]),
    ("\n        foo = 3xyz\n", [(K.KEY, "foo", 2, 9), (K.STRING, "3xyz", 2, 15)]),
    (
        "\n        map {\n          foo = 3xyz}\n",
        [
            (K.KEY, "map", 2, 9),
            (K.MAP_START, "", 2, 14),
            (K.KEY, "foo", 3, 11),
            (K.STRING, "3xyz", 3, 17),
            (K.MAP_END, "", 3, 22),
        ],
    ),
    ("foo = \\x65", [(K.KEY, "foo", 1, 0), (K.STRING, "e", 1, 9)]),
    ("foo = 123", [(K.KEY, "foo", 1, 0), (K.INTEGER, "123", 1, 6)]),
    ("foo=-123\r\n", [(K.KEY, "foo", 1, 0), (K.INTEGER, "-123", 1, 4)]),
    ("foo = 1K", [(K.KEY, "foo", 1, 0), (K.INTEGER, "1K", 1, 6)]),
    ("foo = 1Gb", [(K.KEY, "foo", 1, 0), (K.INTEGER, "1Gb", 1, 6)]),
    ("foo = -1GB ", [(K.KEY, "foo", 1, 0), (K.INTEGER, "-1GB", 1, 6)]),
    ("foo = 1Ghz", [(K.KEY, "foo", 1, 0), (K.STRING, "1Ghz", 1, 6)]),
    ("foo = 2Pie", [(K.KEY, "foo", 1, 0), (K.STRING, "2Pie", 1, 6)]),
    ("foo = 3Mbs,", [(K.KEY, "foo", 1, 0), (K.STRING, "3Mbs", 1, 6)]),
    (
        "foo = 4Gb, bar = 5Gø",
        [
            (K.KEY, "foo", 1, 0),
            (K.INTEGER, "4Gb", 1, 6),
            (K.KEY, "bar", 1, 11),
            (K.STRING, "5Gø", 1, 17),
        ],
    ),
    ("foo = 22.2", [(K.KEY, "foo", 1, 0), (K.FLOAT, "22.2", 1, 6)]),
    ("foo=true\r\n", [(K.KEY, "foo", 1, 0), (K.BOOL, "true", 1, 4)]),
    ("foo = bar' ", [(K.KEY, "foo", 1, 0), (K.STRING, "bar", 1, 6)]),
    (
        "foo = 2016-05-04T18:53:41Z",
        [(K.KEY, "foo", 1, 0), (K.DATETIME, "2016-05-04T18:53:41Z", 1, 6)],
    ),
    ("foo = $bar", [(K.KEY, "foo", 1, 0), (K.VARIABLE, "bar", 1, 7)]),
    ("foo $bar", [(K.KEY, "foo", 1, 0), (K.VARIABLE, "bar", 1, 5)]),
    (
        "foo = [1, 2, 3, 'bar']",
        [
            (K.KEY, "foo", 1, 0),
            (K.ARRAY_START, "", 1, 7),
            (K.INTEGER, "1", 1, 7),
            (K.INTEGER, "2", 1, 10),
            (K.INTEGER, "3", 1, 13),
            (K.STRING, "bar", 1, 17),
            (K.ARRAY_END, "", 1, 22),
        ],
    ),
    (
        "\n# top level comment\nfoo = [\n 1, # One\n 2, // Two\n 3 # Three\n 'bar'     ,\n"
        ' "bar"\n]\n',
        [
            (K.KEY, "foo", 3, 1),
            (K.ARRAY_START, "", 3, 8),
            (K.INTEGER, "1", 4, 2),
            (K.INTEGER, "2", 5, 2),
            (K.INTEGER, "3", 6, 2),
            (K.STRING, "bar", 7, 3),
            (K.STRING, "bar", 8, 3),
            (K.ARRAY_END, "", 9, 2),
        ],
    ),
    (
        "foo = {ip='127.0.0.1', port = 4242}",
        [
            (K.KEY, "foo", 1, 0),
            (K.MAP_START, "", 1, 7),
            (K.KEY, "ip", 1, 7),
            (K.STRING, "127.0.0.1", 1, 11),
            (K.KEY, "port", 1, 23),
            (K.INTEGER, "4242", 1, 30),
            (K.MAP_END, "", 1, 35),
        ],
    ),
    ("'foo' : 123", [(K.KEY, "foo", 1, 1), (K.INTEGER, "123", 1, 8)]),
    ('" foo" : 123', [(K.KEY, " foo", 1, 1), (K.INTEGER, "123", 1, 9)]),
    ("foo\t\t123\r\n", [(K.KEY, "foo", 1, 0), (K.INTEGER, "123", 1, 5)]),
    ('foo = "\\\\end"', [(K.KEY, "foo", 1, 0), (K.STRING, "\\end", 1, 8)]),
    ("foo = start\\x7Cend", [(K.KEY, "foo", 1, 0), (K.STRING, "start|end", 1, 9)]),
    ("foo = \\x3cmiddle\\x3E", [(K.KEY, "foo", 1, 0), (K.STRING, "<middle>", 1, 12)]),
    ("foo = \\\\true", [(K.KEY, "foo", 1, 0), (K.STRING, "\\true", 1, 7)]),
    ("foo = \\\\$var", [(K.KEY, "foo", 1, 0), (K.STRING, "\\$var", 1, 7)]),
    ('foo = ""', [(K.KEY, "foo", 1, 0), (K.STRING, "", 1, 7)]),
    (
        "foo='1'; bar=2.2; baz=true;",
        [
            (K.KEY, "foo", 1, 0),
            (K.STRING, "1", 1, 5),
            (K.KEY, "bar", 1, 9),
            (K.FLOAT, "2.2", 1, 13),
            (K.KEY, "baz", 1, 18),
            (K.BOOL, "true", 1, 22),
        ],
    ),
    (
        "foo = {'bar-1.2.3' = { port:4242 }}",
        [
            (K.KEY, "foo", 1, 0),
            (K.MAP_START, "", 1, 7),
            (K.KEY, "bar-1.2.3", 1, 8),
            (K.MAP_START, "", 1, 22),
            (K.KEY, "port", 1, 23),
            (K.INTEGER, "4242", 1, 28),
            (K.MAP_END, "", 1, 34),
            (K.MAP_END, "", 1, 35),
        ],
    ),
    (
        "\nnumbers (\n1234567890\n)\n",
        [(K.KEY, "numbers", 2, 1), (K.STRING, "\n1234567890\n", 4, 10)],
    ),
    (
        "\nnumbers (\n  12(34)56\n  (\n    7890\n  )\n)\n",
        [(K.KEY, "numbers", 2, 1), (K.STRING, "\n  12(34)56\n  (\n    7890\n  )\n", 7, 10)],
    ),
    ("listen: 127.0.0.1:4222", [(K.KEY, "listen", 1, 0), (K.STRING, "127.0.0.1:4222", 1, 8)]),
    ("include './foo.conf'", [(K.INCLUDE, "./foo.conf", 1, 9)]),
    (
        "include ./foo.conf; x = 1",
        [(K.INCLUDE, "./foo.conf", 1, 8), (K.KEY, "x", 1, 20), (K.INTEGER, "1", 1, 24)],
    ),
    (
        "foo { include 'a.conf' }",
        [
            (K.KEY, "foo", 1, 0),
            (K.MAP_START, "", 1, 5),
            (K.INCLUDE, "a.conf", 1, 15),
            (K.MAP_END, "", 1, 24),
        ],
    ),
    # Errors, with the positions nats-server reports.
    ("foo = xyz\\x\n", [(K.KEY, "foo", 1, 0), (K.ERROR, "", 2, 1)]),
    ('foo = "[\\x]"', [(K.KEY, "foo", 1, 0), (K.ERROR, "", 1, 12)]),
    ("foo = .2", [(K.KEY, "foo", 1, 0), (K.ERROR, "Floats must start with a digit", 1, 7)]),
    (" :foo = 22", [(K.ERROR, "Unexpected key separator ':'", 1, 1)]),
    (
        '\nlisten: "localhost:4242\n\nhttp: localhost:8222\n',
        [(K.KEY, "listen", 2, 1), (K.ERROR, "Unexpected EOF.", 5, 1)],
    ),
    (
        "\nlisten = 4222\n\ncluster = {\n\n  foo = bar\n\n",
        [
            (K.KEY, "listen", 2, 1),
            (K.INTEGER, "4222", 2, 10),
            (K.KEY, "cluster", 4, 1),
            (K.MAP_START, "", 4, 12),
            (K.KEY, "foo", 6, 3),
            (K.STRING, "bar", 6, 9),
            (K.ERROR, "Unexpected EOF processing map.", 8, 1),
        ],
    ),
    (
        "\nlisten = 4222\n\nquote = (\n\n  foo = bar\n\n",
        [
            (K.KEY, "listen", 2, 1),
            (K.INTEGER, "4222", 2, 10),
            (K.KEY, "quote", 4, 1),
            (K.ERROR, "Unexpected EOF processing block.", 8, 1),
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), LEX_CASES)
def test_lexer_items_and_positions(text: str, expected: list[tuple[Any, ...]]) -> None:
    got = items(text)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if e[0] is K.ERROR and e[1] == "":
            assert (g[0], g[2], g[3]) == (e[0], e[2], e[3])  # message checked elsewhere
        else:
            assert g == e


PARSE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("foo='1'; bar=2.2; baz=true; boo=22", {"foo": "1", "bar": 2.2, "baz": True, "boo": 22}),
    ("foo: 1\nbar = 2\nbaz 3", {"foo": 1, "bar": 2, "baz": 3}),
    ("foo=TRUE", {"foo": True}),
    (
        "a=yes\nb=On\nc=NO\nd=off\ne=False",
        {"a": True, "b": True, "c": False, "d": False, "e": False},
    ),
    ("index = 22\nfoo = $index", {"index": 22, "foo": 22}),
    (
        "index = 22\nnest {\n  index = 11\n  foo = $index\n}\nbar = $index",
        {"index": 22, "nest": {"index": 11, "foo": 11}, "bar": 22},
    ),
    ("password: $2a$11$ooo", {"password": "$2a$11$ooo"}),
    (
        "k = 8k\nkb = 4kb\nki = 3ki\nkib = 4kib\nm = 1m\nmb = 2MB\nmi = 2Mi\nmib = 64MiB\n"
        "g = 2g\ngb = 22GB\ngi = 22Gi\ngib = 22GiB\nt = 1t\ntb = 22TB\nti = 22Ti\ntib = 22TiB\n"
        "p = 1p\npb = 22PB\npi = 22Pi\npib = 22PiB\ne = 1e\neb = 2EB\nei = 3Ei\neib = 4EiB",
        {
            "k": 8000,
            "kb": 4096,
            "ki": 3072,
            "kib": 4096,
            "m": 10**6,
            "mb": 2 << 20,
            "mi": 2 << 20,
            "mib": 64 << 20,
            "g": 2 * 10**9,
            "gb": 22 << 30,
            "gi": 22 << 30,
            "gib": 22 << 30,
            "t": 10**12,
            "tb": 22 << 40,
            "ti": 22 << 40,
            "tib": 22 << 40,
            "p": 10**15,
            "pb": 22 << 50,
            "pi": 22 << 50,
            "pib": 22 << 50,
            "e": 10**18,
            "eb": 2 << 60,
            "ei": 3 << 60,
            "eib": 4 << 60,
        },
    ),
    ("neg = -1k", {"neg": -1000}),
    # int64 arithmetic wraps, as in Go.
    ("big = 10e", {"big": 10 * 10**18 - (1 << 64)}),
    (
        "foo  {\n  host {\n    ip   = '127.0.0.1'\n    port = 4242\n  }\n"
        '  servers = [ "a.com", "b.com", "c.com"]\n}\n',
        {
            "foo": {
                "host": {"ip": "127.0.0.1", "port": 4242},
                "servers": ["a.com", "b.com", "c.com"],
            }
        },
    ),
    (
        "cluster {\n  port: 4244\n  authorization {\n    user: route_user\n"
        "    password: top_secret\n    timeout: 1\n  }\n  // comment\n  routes = [\n    nats-route://foo:bar@apcera.me:4245\n"
        "    nats-route://foo:bar@apcera.me:4246\n  ]\n}\n",
        {
            "cluster": {
                "port": 4244,
                "authorization": {"user": "route_user", "password": "top_secret", "timeout": 1},
                "routes": [
                    "nats-route://foo:bar@apcera.me:4245",
                    "nats-route://foo:bar@apcera.me:4246",
                ],
            }
        },
    ),
    (
        "foo  {\n  expr = '(true == \"false\")'\n  text = 'This is a multi-line\ntext block.'\n}\n",
        {"foo": {"expr": '(true == "false")', "text": "This is a multi-line\ntext block."}},
    ),
    (
        '  array [\n    { abc: 123 }\n    { xyz: "word" }\n  ]',
        {"array": [{"abc": 123}, {"xyz": "word"}]},
    ),
    (
        "now = 2016-05-04T18:53:41Z\ngmt = false",
        {"now": datetime(2016, 5, 4, 18, 53, 41, tzinfo=UTC), "gmt": False},
    ),
    (
        "mixed = [1, 'two', 3.0, true, {four: 4}, [5,]\n]",
        {"mixed": [1, "two", 3.0, True, {"four": 4}, [5]]},
    ),
    ("arr = [\n  a\n  b\n]", {"arr": ["a", "b"]}),
    ("arr = [a, b,]", {"arr": ["a", "b"]}),
    ("{}", {}),
    ("", {}),
    ("# only a comment\n// and another\n", {}),
    ("{ listen: 0.0.0.0:4222 }", {"listen": "0.0.0.0:4222"}),
    ("{\n  {\n    listen: 0.0.0.0:4222 // c\n  }\n  # x\n}\n# y\n", {"listen": "0.0.0.0:4222"}),
    (
        '{\n  "http_port": 8227,\n  "write_deadline": "1h",\n  "cluster": {\n    "port": 6222,\n'
        '    "routes": [\n      "nats://127.0.0.1:4222",\n      "nats://127.0.0.1:4223"\n'
        "    ]\n  }\n}\n",
        {
            "http_port": 8227,
            "write_deadline": "1h",
            "cluster": {"port": 6222, "routes": ["nats://127.0.0.1:4222", "nats://127.0.0.1:4223"]},
        },
    ),
    ("accounts { users = [{}]}\n}\n", {"accounts": {"users": [{}]}}),
    ("raw (\nline one\n  line two\n)\n", {"raw": "\nline one\n  line two\n"}),
    # A raw block ending at EOF keeps its ')' in nats-server; so do we.
    ("raw (\nxyz\n)", {"raw": "\nxyz\n)"}),
    ('esc = "a\\tb\\nc\\rd\\"e\\\\f\\x41"', {"esc": 'a\tb\nc\rd"e\\fA'}),
    ('utf8 = "\\xc3\\xa9"', {"utf8": "é"}),
    ("ip = 127.0.0.1", {"ip": "127.0.0.1"}),
    ("f = 1.5\ng = -0.25", {"f": 1.5, "g": -0.25}),
    ("s = 3xyz", {"s": "3xyz"}),
    ("url = nats://a:b@host:4222/path?x=y", {"url": "nats://a:b@host:4222/path?x=y"}),
    ("semi = 1; comma = 2, nl = 3", {"semi": 1, "comma": 2, "nl": 3}),
    ("key\n  value", {"key": "value"}),
    ("m { a = 1, b = 2; c = 3\n d: 4 }", {"m": {"a": 1, "b": 2, "c": 3, "d": 4}}),
    ("m {\n a =\n 1 }", {"m": {"a": 1}}),
    ("'quoted key' = 1\n\"dq key\" : 2", {"quoted key": 1, "dq key": 2}),
    ("m { 'a b': 1, \"c d\": 2 }", {"m": {"a b": 1, "c d": 2}}),
    ("empty = \"\"\nsq = ''", {"empty": "", "sq": ""}),
    # Quirks kept for compatibility with nats-server.
    ("nums = [1, 2]\n]", {"nums": [1, "2]"]}),
    ("foo =", {"foo": ""}),
    ("a = 1kbb\nb = 2", {"b": 2}),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES)
def test_parse_values(text: str, expected: dict[str, Any]) -> None:
    assert parse(text) == expected


ERROR_CASES = [
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "config is invalid", (1, 41)),
    ("     aaaaaaaaaaaaaaaaaaaaaaaaaaa         ", "config is invalid", (1, 41)),
    ("\n  # comment\n   aaa\n     ", "config is invalid", (4, 6)),
    ("\n      a,a,a,a,a\n      ", "config is invalid", (3, 7)),
    ("foo = [1, 2", 'Expected an array value terminator ","', (1, 11)),
    ("foo = [1, 2]", 'Expected an array value terminator ","', (1, 12)),
    ("foo = [,1]", "Unexpected array value terminator ','.", (1, 8)),
    ("foo { a: 1", 'Expected a map value terminator ","', (1, 10)),
    ("foo { a: 1\n", "Unexpected EOF processing map.", (2, 1)),
    ("foo { a", "Unexpected EOF processing map key.", (1, 7)),
    ("foo { 'a", "Unexpected EOF processing quoted map key.", (1, 8)),
    ('foo { "a', "Unexpected EOF processing double quoted map key.", (1, 8)),
    ("foo { a: 1 ]", 'Expected a map value terminator ","', (1, 12)),
    ("foo { a: , }", "Unexpected map value terminator", (1, 10)),
    ("foo { =a }", "Unexpected key separator '='.", (1, 6)),
    ("foo { ] }", "Unexpected array end ']' processing map.", (1, 6)),
    ('foo = "abc', "Unexpected EOF.", (1, 10)),
    ("foo = 'abc", "Unexpected EOF.", (1, 10)),
    ("foo = (\nabc", "Unexpected EOF processing block.", (2, 4)),
    ("foo = \\y", "Invalid escape character 'y'.", (1, 8)),
    ('foo = "[\\xe]"', "Expected two hexadecimal digits after '\\x', but got 'e]'", (1, 12)),
    ("foo = .2", "Floats must start with a digit", (1, 7)),
    ("foo = -.2", "Floats must start with a digit, not '.'.", (1, 8)),
    ("foo = -x", "Expected a digit but got 'x'.", (1, 8)),
    ("foo = 1.x", "Floats must have a digit after the '.'", (1, 9)),
    ("foo = 12-3", "All ISO8601 dates must be in full Zulu form.", (1, 9)),
    ("foo = 2016-05-04X", "Expected 'T' in ISO8601 datetime", (1, 17)),
    ("foo = 2016-13-04T18:53:41Z", "expected Zulu formatted DateTime", (1, 6)),
    ("foo =\n1", "Expected value but found new line", (2, 1)),
    ("foo = 1 2", "Expected a top-level value to end with a new line", (1, 9)),
    ("{ foo = 1 2 }", "Expected a block-level value to end with a new line", (1, 11)),
    ("{ { foo = 1 } x }", "Expected a block-level to end with a '}'", (1, 15)),
    ("/foo = 1", "Unexpected EOF.", (1, 1)),
    (" :foo = 22", "Unexpected key separator ':'", (1, 1)),
    ("include [", "Expected include value but found start of an array", (1, 9)),
    ("include {", "Expected include value but found start of a map", (1, 9)),
    ("include (", "Expected include value but found start of a block", (1, 9)),
    ("include 5", "Expected include value but found start of a number", (1, 9)),
    ("include \\x", "Expected include value but found escape sequence", (1, 9)),
    ("include 'x", "Unexpected EOF in quoted include", (1, 10)),
    ('include "x', "Unexpected EOF in double quoted include", (1, 10)),
    ("foo = 99999999999999999999", "integer '99999999999999999999' is out of the range", (1, 6)),
    ("foo = 1" + "0" * 400 + ".5", "is out of the range", (1, 6)),
    (
        "foo = $nope_no_such_var",
        "variable reference for 'nope_no_such_var' on line 1 can not be found",
        (1, 7),
    ),
    ("foo = $", "variable reference for '' on line 1 can not be found", (1, 7)),
    ("a { b = 1 }\nc = $b", "variable reference for 'b' on line 2 can not be found", (2, 6)),
]


@pytest.mark.parametrize(("text", "message", "position"), ERROR_CASES)
def test_parse_errors(text: str, message: str, position: tuple[int, int]) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text, "test.conf")
    err = info.value
    assert message in err.reason
    assert (err.line, err.col) == position
    assert str(err).startswith(f"test.conf:{position[0]}:{position[1]}: ")


def test_error_without_filename_names_string() -> None:
    with pytest.raises(ConfigError, match=r"^<string>:1:7: variable reference"):
        parse("foo = $nope_no_such_var")


# -- variables ---------------------------------------------------------------------------------


def test_env_variable_is_parsed_as_conf_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNATSD_T_NUM", "22")
    monkeypatch.setenv("PYNATSD_T_STR", "xyz")
    monkeypatch.setenv("PYNATSD_T_SIZE", "3Gyz")
    monkeypatch.setenv("PYNATSD_T_QUOTED", "'3xyz'")
    monkeypatch.setenv("PYNATSD_T_MAP", "{ a: 1, b: [x, y] }")
    monkeypatch.setenv("PYNATSD_T_KB", "2KB")
    text = (
        "a = $PYNATSD_T_NUM\nb = $PYNATSD_T_STR\nc = $PYNATSD_T_SIZE\nd = $PYNATSD_T_QUOTED\n"
        "e = $PYNATSD_T_MAP\nf = $PYNATSD_T_KB"
    )
    assert parse(text) == {
        "a": 22,
        "b": "xyz",
        "c": "3Gyz",
        "d": "3xyz",
        "e": {"a": 1, "b": ["x", "y"]},
        "f": 2048,
    }


def test_file_variable_shadows_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNATSD_T_SHADOW", "env")
    assert parse("PYNATSD_T_SHADOW = file\nx = $PYNATSD_T_SHADOW")["x"] == "file"


def test_env_variable_cycle_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNATSD_T_A", "$PYNATSD_T_B")
    monkeypatch.setenv("PYNATSD_T_B", "$PYNATSD_T_A")
    with pytest.raises(ConfigError, match="variable reference cycle for 'PYNATSD_T_A'"):
        parse("x = $PYNATSD_T_A")


def test_env_variable_that_does_not_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYNATSD_T_BAD", "[1, 2")
    with pytest.raises(ConfigError, match="could not be parsed"):
        parse("x = $PYNATSD_T_BAD")


def test_variable_lookup_skips_arrays_and_sees_outer_maps() -> None:
    text = "v = outer\nm { arr = [ { x = $v } ] }\nn { v = inner, arr = [$v] }"
    assert parse(text) == {
        "v": "outer",
        "m": {"arr": [{"x": "outer"}]},
        "n": {"v": "inner", "arr": ["inner"]},
    }


def test_used_variable_is_marked() -> None:
    nodes = parse_nodes("x = 5\nport = $x\ny = 6")
    assert nodes["x"].used_variable
    assert not nodes["y"].used_variable
    assert (nodes["port"].line, nodes["port"].col) == (2, 1)


# -- includes -------------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_include_forms_and_relative_paths(tmp_path: Path) -> None:
    write(tmp_path / "sub" / "a.conf", "a = 1\ninclude 'b.conf'\n")
    write(tmp_path / "sub" / "b.conf", "b = 2\n")
    write(tmp_path / "sub" / "auth.conf", "user: alice\npass: secret\n")
    main = write(
        tmp_path / "main.conf",
        'include "sub/a.conf"\nauthorization { include ./sub/auth.conf }\nc = $b\n',
    )
    assert parse_file(main) == {
        "a": 1,
        "b": 2,
        "authorization": {"user": "alice", "pass": "secret"},
        "c": 2,
    }


def test_include_keeps_positions_of_the_included_file(tmp_path: Path) -> None:
    write(tmp_path / "inc.conf", "\n  port: 4222\n")
    main = write(tmp_path / "main.conf", "include inc.conf\n")
    node = parse_file_nodes(main)["port"]
    assert (node.file, node.line, node.col) == (str(tmp_path / "inc.conf"), 2, 3)


def test_include_cycle_is_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path / "a.conf", "include b.conf\n")
    write(tmp_path / "b.conf", "x = 1\ninclude a.conf\n")
    with pytest.raises(ConfigError) as info:
        parse_file(tmp_path / "a.conf")
    message = str(info.value)
    assert "include cycle" in message
    assert message.startswith(f"{tmp_path / 'a.conf'}:1:8: error parsing include file 'b.conf'")


def test_self_include_is_a_cycle(tmp_path: Path) -> None:
    write(tmp_path / "a.conf", "include a.conf\n")
    with pytest.raises(ConfigError, match="include cycle"):
        parse_file(tmp_path / "a.conf")


def test_same_file_included_twice_is_not_a_cycle(tmp_path: Path) -> None:
    write(tmp_path / "common.conf", "x = 1\n")
    main = write(tmp_path / "main.conf", "a { include common.conf }\nb { include common.conf }\n")
    assert parse_file(main) == {"a": {"x": 1}, "b": {"x": 1}}


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (None, "open {dir}/missing.conf: no such file or directory"),
        ("dir", "read {dir}/missing.conf: is a directory"),
        ("bad", "error parsing include file 'missing.conf', {dir}/missing.conf:1:4: Unexpected"),
    ],
)
def test_unreadable_or_bad_include(tmp_path: Path, setup: str | None, message: str) -> None:
    target = tmp_path / "missing.conf"
    if setup == "dir":
        target.mkdir()
    elif setup == "bad":
        write(target, "x { ")
    main = write(tmp_path / "main.conf", "include missing.conf\n")
    with pytest.raises(ConfigError) as info:
        parse_file(main)
    assert message.format(dir=tmp_path) in str(info.value)


def test_absolute_include_is_joined_like_nats_server(tmp_path: Path) -> None:
    write(tmp_path / "inc.conf", "x = 1\n")
    main = write(tmp_path / "main.conf", f"include '{tmp_path}/inc.conf'\n")
    with pytest.raises(ConfigError, match="no such file"):
        parse_file(main)


def test_missing_top_level_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"open .*nope\.conf: no such file or directory"):
        parse_file(tmp_path / "nope.conf")


@pytest.mark.parametrize(
    ("directory", "name", "joined"),
    [
        ("/a/b", "c.conf", "/a/b/c.conf"),
        ("/a/b", "/etc/c.conf", "/a/b/etc/c.conf"),
        (".", "../x", "../x"),
        ("", "x", "x"),
        ("a", "", "a"),
        ("//a", "b", "/a/b"),
    ],
)
def test_go_join(directory: str, name: str, joined: str) -> None:
    assert go_join(directory, name) == joined


# -- digest ---------------------------------------------------------------------------------------

DIGEST_FOO_BAR = "sha256:226e49e13d16e5e8aa0d62e58cd63361bf097d3e2b2444aa3044334628a2e8de"


@pytest.mark.parametrize(
    ("text", "digest"),
    [
        ("foo = bar", DIGEST_FOO_BAR),
        ("# Comments and whitespace have no effect\n   foo = bar\n", DIGEST_FOO_BAR),
        ("'foo': 'bar'", DIGEST_FOO_BAR),
        ("{ 'foo': 'bar' }", DIGEST_FOO_BAR),
        (
            "BAR_USERS = { users = [ {user = \"bar\"} ]}\nhello = 'world'\naccounts {\n"
            "  QUUX_USERS = [ { user: quux }]\n  bar = $BAR_USERS\n"
            "  quux = { users = $QUUX_USERS }\n"
            "}\nvery { nested { env { VAR = 'NESTED', quux = $VAR }}}\n",
            "sha256:bddb282343249c26d3edcef9bfaa9d2711505fc67210380e871405ba394a9186",
        ),
        (
            "hello = 'world'\naccounts {\n  bar  = { users = [ { user = \"bar\" } ]}\n"
            "  quux = { users = [ { user: quux   } ]}\n}\n"
            "very { nested { env { quux = 'NESTED' }}}\n",
            "sha256:34f8faf3f269fe7509edc4742f20c8c4a7ad51fe21f8b361764314b533ac3ab5",
        ),
        (
            'BAR_USERS = { users = [ {user = "foo"} ]}\nbar = $BAR_USERS\naccounts {\n'
            "  users = $BAR_USERS\n}\n",
            "sha256:b0e2ba0b8ec2cb75681b5c5d61789cda0c9942c2f9fe16cdb7f6703364485360",
        ),
        ("port: 4222", "sha256:797533ebd0dfba7d34a0f9337ecf147e442871f48ddfd07ed751575a5737267e"),
        (
            "max_payload: 100MB\nmax_pending: 1MB",
            "sha256:55827599b5cd283c9113cba8c565997028d757479a8f59a29fa0e9b4c4cdb688",
        ),
        (
            "pid_file (\nxyz\n)",
            "sha256:68d21d56139b9c41a8071530d489c4f637ffa1fe75dd9a4230b556536e0e300c",
        ),
        # Go's JSON: \b and \f short escapes, HTML-safe <>&, U+2028 escaped, DEL raw.
        (
            'pid_file: "a\\x08b"',
            "sha256:893a1ac8ede7bf7c5bafa40fca5950182b1cbb324a8a477621877e2e77ee9175",
        ),
        (
            'pid_file: "a<&>b"',
            "sha256:fa6d5d5a5ed546c733d3d7adad5ed9262e4638ebe06239c5aa09eaf8b42fe121",
        ),
        (
            'pid_file: "a\\xe2\\x80\\xa8b"',
            "sha256:199b85c40dbb4e1f72b5571d891e4c35f22f8118595c36b9bbfb74b6c088c78e",
        ),
        # A byte that is not UTF-8 becomes U+FFFD.
        (
            'pid_file: "a\\xe9b"',
            "sha256:e5dcaf053931706565340bdb55c637f6011d6ea820dabbcfd4e7ce6debeb22f5",
        ),
        (
            'pid_file: "a\\x7fb"',
            "sha256:62d9d3d850b5603f494ba8eef26787e4b877c3ace96db5470729ab53e51500a1",
        ),
    ],
)
def test_digest_matches_nats_server(text: str, digest: str) -> None:
    assert config_digest(parse(text)) == digest


def test_digest_of_includes(tmp_path: Path) -> None:
    write(tmp_path / "foo.conf", ' users = [{user = "foo"}]')
    write(tmp_path / "quux.conf", ' users = [{user = "quux"}]')
    main = write(
        tmp_path / "nats.conf",
        "accounts {\n  foo { include 'foo.conf'}\n  bar { users = [{user = \"bar\"}] }\n"
        "  quux { include 'quux.conf'}\n}\n",
    )
    expected = "sha256:e72d70c91b64b0f880f86decb95ec2600cbdcf8bdcd2355fce5ebc54a84a77e9"
    assert config_digest(main) == expected
    assert config_digest(os.fspath(main)) == expected


@pytest.mark.parametrize(
    ("value", "json"),
    [
        (1.5, "1.5"),
        (2.0, "2"),
        (1e-07, "1e-7"),
        (1e-06, "0.000001"),
        (1e21, "1e+21"),
        (-0.0, "-0"),
        (1.2345678901234568e20, "123456789012345680000"),
        (1.5e300, "1.5e+300"),
    ],
)
def test_digest_float_encoding(value: float, json: str) -> None:
    import hashlib

    expected = hashlib.sha256(('{"x":' + json + "}\n").encode()).hexdigest()
    assert config_digest({"x": value}) == "sha256:" + expected


# -- robustness -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "A@@Føøøø?\u02dbø:{øøøø\u02d9\u02d9",
        'include "9/\ufffd',
        "[" * 5000,
        "a = " + "[" * 5000 + "]" * 5000,
    ],
)
def test_garbage_gives_config_error_not_traceback(text: str) -> None:
    with contextlib.suppress(ConfigError):
        parse(text, "x.conf")


def test_non_ascii_columns_are_bytes() -> None:
    with pytest.raises(ConfigError) as info:
        parse("é = 1 x")
    assert (info.value.line, info.value.col) == (1, 8)


def test_unicode_space_separates_key_and_value() -> None:
    assert parse("key\u00a0value") == {"key": "value"}


def test_nul_byte_acts_as_end_of_input() -> None:
    assert parse(b"pid (\nabc\n)\x00") == {"pid": "\nabc\n"}


def test_large_file_is_linear() -> None:
    text = "".join(f"key{i} = 'value {i}' # comment\n" for i in range(20000))
    assert len(parse(text)) == 20000


# -- round trip property ------------------------------------------------------------------------

_BARE_KEY = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True).filter(
    lambda k: k.lower() != "include"
)
# Characters that mean something to the lexer are drawn far more often than chance would.
_CHARS = st.one_of(
    st.sampled_from(list("\"'\\$#{}[]();,:= \t\n\r/.-0123456789eEkKbB\x00\x85\xa0\u2028é")),
    st.characters(blacklist_categories=("Cs",)),
)
_ANY_KEY = st.one_of(_BARE_KEY, st.text(_CHARS, max_size=8))
_TEXT = st.one_of(
    st.text(_CHARS, max_size=12),
    st.text(_CHARS, max_size=12).map(lambda s: "\n" + s + "\n"),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_./@-]{0,10}", fullmatch=True),
)
_SCALARS = st.one_of(
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30),
    st.booleans(),
    _TEXT,
    st.datetimes(
        min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
    ).map(lambda d: d.replace(microsecond=0)),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_ANY_KEY, inner, max_size=4)
    ),
    max_leaves=12,
)
_BARE_VALUE = __import__("re").compile(r"[A-Za-z_][A-Za-z0-9_./@-]*\Z")
_BOOL_WORDS = {"true", "false", "yes", "no", "on", "off"}


def _raw_block_ok(value: Any) -> bool:
    """Whether `key (...)` can hold this string: it must start and end with a new line and have
    no line that is just ')' before its end."""
    return (
        isinstance(value, str)
        and value.startswith("\n")
        and value.endswith("\n")
        and "\n)" not in value[:-1]
        and "\0" not in value
    )


class _Writer:
    """Serialises values to conf text, each choice (separators, quoting, layout) drawn at random."""

    def __init__(self, draw: Any) -> None:
        self.draw = draw

    def pick(self, *options: str) -> str:
        return str(self.draw(st.sampled_from(options)))

    def key(self, key: str) -> str:
        quote = self.pick('"', "'", "")
        if quote == "" and (_BARE_VALUE.match(key) is None or key.lower() == "include"):
            quote = '"' if '"' not in key else "'"
        if quote and quote in key:
            quote = "'" if quote == '"' else '"'
        return quote + key + quote

    def quotable(self, key: str) -> bool:
        return "\0" not in key and not ('"' in key and "'" in key)

    def entries(self, mapping: dict[str, Any], indent: str, in_map: bool) -> str:
        out = []
        for key, value in mapping.items():
            written = self.key(key)
            sep = self.pick(": ", " = ", " ", ":", "=")
            if isinstance(value, dict) and self.draw(st.booleans()):
                # `key{` only works after a quoted key: a bare key would swallow the brace.
                sep = self.pick(" ", "") if written.endswith(("'", '"')) else " "
            if _raw_block_ok(value) and self.draw(st.booleans()):
                out.append(f"{indent}{written} ({value})\n")
                continue
            end = self.pick("\n", ";\n", ",\n", " # note\n", " // note\n")
            if not in_map and end == ",\n" and self.draw(st.booleans()):
                end = "; "
            out.append(f"{indent}{written}{sep}{self.value(value, indent)}{end}")
        return "".join(out)

    def value(self, value: Any, indent: str) -> str:
        if isinstance(value, bool):
            word = self.pick(*(("true", "yes", "on") if value else ("false", "no", "off")))
            return self.pick(word, word.upper(), word.capitalize())
        if isinstance(value, int):
            return self.integer(value)
        if isinstance(value, float):
            text = format(Decimal(repr(value)), "f")
            return text if "." in text else text + ".0"
        if isinstance(value, datetime):
            return value.strftime("%Y-%m-%dT%H:%M:%SZ")
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, list):
            inner = indent + "  "
            # Every element gets a terminator: nats-server lexes `2]` as a string.
            if self.draw(st.booleans()):
                return "[" + "".join(self.value(v, inner) + ", " for v in value) + "]"
            parts = [f"{inner}{self.value(v, inner)}{self.pick(',', '', ' #c')}\n" for v in value]
            return "[\n" + "".join(parts) + indent + "]"
        assert isinstance(value, dict)
        inner = indent + "  "
        return "{\n" + self.entries(value, inner, True) + indent + "}"

    def integer(self, value: int) -> str:
        for suffix, factor in (("k", 1000), ("KB", 1024), ("Mi", 1 << 20), ("g", 10**9)):
            if value and value % factor == 0 and self.draw(st.booleans()):
                return f"{value // factor}{suffix}"
        return str(value)

    def string(self, value: str) -> str:
        style = self.pick("dq", "sq", "bare")
        if (
            style == "bare"
            and _BARE_VALUE.match(value)
            and value.lower() not in _BOOL_WORDS
            and not value.startswith("$")
        ):
            return value
        if style == "sq" and "'" not in value and "\0" not in value:
            return f"'{value}'"
        out = []
        for c in value:
            if c in '"\\':
                out.append("\\" + c)
            elif c in "\t\n\r":
                out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r"}[c])
            elif ord(c) < 0x20:
                out.append(f"\\x{ord(c):02x}")
            else:
                out.append(c)
        return '"' + "".join(out) + '"'


@st.composite
def conf_documents(draw: Any) -> tuple[dict[str, Any], str]:
    data = draw(st.dictionaries(_ANY_KEY, _VALUES, max_size=6))
    writer = _Writer(draw)
    data = {k: v for k, v in data.items() if writer.quotable(k)}
    _drop_unquotable(writer, data)
    text = writer.entries(data, "", False)
    if draw(st.booleans()):
        text = "{\n" + text + "}\n"
    return data, text


def _drop_unquotable(writer: _Writer, value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k in value if not writer.quotable(k)]:
            del value[key]
        for v in value.values():
            _drop_unquotable(writer, v)
    elif isinstance(value, list):
        for v in value:
            _drop_unquotable(writer, v)


@settings(
    max_examples=int(os.environ.get("PYNATSD_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(conf_documents())
def test_round_trip(document: tuple[dict[str, Any], str]) -> None:
    data, text = document
    assert parse(text) == data, text
