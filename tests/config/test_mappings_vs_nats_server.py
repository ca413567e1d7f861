"""Subject mapping configuration errors, side by side: each file goes through
`nats-server -t -c` and pynatsd's loader, and both must report the same errors (text and
position). nats-server walks the `mappings` map in random (Go map) order, so errors are
compared as sets of lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from pynatsd.config import ConfigError, load_config
from support.configcheck import assert_check_agrees
from support.natsserver import nats_server_binary

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")

CONFIGS = {
    "valid": """
mappings {
  foo: bar
  "a.*.*": "b.$2.$1"
  "c.*": "c.{{partition(3,1)}}.{{wildcard(1)}}"
  "s.*": "s.{{splitFromLeft(1,2)}}.{{SliceFromRight(1,2)}}.{{split(1,-)}}"
  "l.*": "l.{{left(1,2)}}.{{right(1,2)}}"
  w: [{destination: w.a, weight: 60%}, {dest: w.b, weight: 40}]
  p: {dest: p.x, weight: 100%, cluster: east}
  "f.>": "g.>"
}
""",
    "destinations": """
mappings {
  "foo.*": "bar.$2"
  "x.*": "x.*"
  "y.>": "y.z"
  u: "u.{{unknown(1)}}"
  l: "l.{{left(1,1)}}"
  k: "k.{{wildcard()}}"
  m: "m.{{partition(a)}}"
  n: "n..x"
  o: "o.>.x"
  "r.*": "r.{{wildcard(1,2)}}"
}
""",
    "weights": """
mappings {
  x: [{destination: y, weight: 50%}, {destination: z, weight: 60}]
  q: {dest: r}
  "a b": c
  w: [{destination: y, weight: "x%"}, {destination: z, weight: 0.5}]
  v: [{destination: z, weight: 120}, {destination: x, foo: 1, weight: 1}]
  d: [{destination: e, weight: 10}, {destination: e, weight: 10}]
  t: 5
}
""",
    "in an account": """
accounts {
  A {
    mappings { "a.*": "b.$3", ok: fine }
  }
  B {
    maps { c: [{destination: d, weight: 101}] }
  }
}
""",
    "not a map": "mappings: foo\n",
    "bad destination type": "mappings { a: [{destination: 5, weight: 1}] }\n",
    "bad destination type in a map": "mappings {\n  a: {destination: 5, weight: 1}\n}\n",
    "bad cluster type": "mappings {\n  a: [\n    {destination: b, weight: 1, cluster: 2}\n  ]\n}\n",
    "missing weight in an array": "mappings {\n  a: [\n    {destination: y}\n  ]\n}\n",
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mapping_errors_agree(name: str, tmp_path: Path) -> None:
    assert_check_agrees(CONFIGS[name], tmp_path, load_config, ConfigError)
