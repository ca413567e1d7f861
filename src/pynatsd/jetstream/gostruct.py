"""Go structs as Python dataclasses: strict JSON decoding and Go's JSON encoding.

nats-server decodes API requests with Go's `encoding/json` in strict mode (an unknown field is
an error) and writes its replies with the same package (fields in struct order, `omitempty`
fields left out when empty). The configuration classes (`StreamConfig`, `ConsumerConfig` and
their parts, in `stream_config.py` and `consumer_config.py`) are dataclasses whose fields are
declared with `go(...)`: the field's Python name is its JSON key, and the Go type drives both
directions here. An error names the field the way Go's decoder does
(`json: cannot unmarshal string into Go struct field StreamConfigRequest.max_msgs of type int64`).

Go types understood: string, bool, int, int32, int64, uint64, duration, time, []string,
[]duration, map (map[string]string), enum:a,b (a string with allowed values), struct:Name (a
value), *struct:Name (a pointer: None when nil) and []struct:Name / []*struct:Name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pynatsd.jetstream import errors
from pynatsd.jetstream.errors import ApiError
from pynatsd.jetstream.util import format_go_time, parse_go_time

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a Go struct: JSON key, Go type, `omitempty`."""

    key: str
    go: str
    omitempty: bool = False


# Every registered struct by its Go name, and its fields in declaration (= Go struct) order.
_STRUCTS: dict[str, type[Any]] = {}
_FIELDS: dict[type[Any], tuple[Field, ...]] = {}
_BY_KEY: dict[type[Any], dict[str, Field]] = {}


def go(go_type: str, omitempty: bool = False, default: Any = None) -> Any:
    """A dataclass field holding a Go struct field of type `go_type`; its default is Go's zero
    value (`default` for an enum or where the zero is something else)."""
    meta = {"go": go_type, "omitempty": omitempty}
    factory: Callable[[], Any] | None = None
    if go_type.startswith("[]"):
        factory = list
    elif go_type == "map":
        factory = dict
    elif go_type.startswith("struct:"):
        name = go_type[7:]

        def factory() -> Any:
            return _STRUCTS[name]()

    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if default is None and not go_type.startswith("*"):
        default = _scalar_zero(go_type)
    return dataclasses.field(default=default, metadata=meta)


def _scalar_zero(go_type: str) -> Any:
    if go_type in ("string", "time") or go_type.startswith("enum:"):
        return ""
    if go_type == "bool":
        return False
    if go_type in _INT_RANGES:
        return 0
    raise AssertionError(go_type)


def go_struct(cls: type[T]) -> type[T]:
    """Register a dataclass (decorate above `@dataclass`) as the Go struct of its name."""
    _STRUCTS[cls.__name__] = cls
    table = tuple(
        Field(f.name, f.metadata["go"], f.metadata["omitempty"])
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    )
    _FIELDS[cls] = table
    _BY_KEY[cls] = {f.key: f for f in table}
    return cls


def struct_fields(cls: type[Any]) -> tuple[Field, ...]:
    return _FIELDS[cls]


# -- encoding -----------------------------------------------------------------------------------


def is_empty(value: Any) -> bool:
    """What Go's `omitempty` leaves out: false, 0, "", nil and empty slices and maps."""
    return value is None or value is False or value == 0 or value == "" or value in ([], {})


def is_zero(obj: Any) -> bool:
    """Every field of the struct `obj` is empty."""
    return all(is_empty(getattr(obj, f.key)) for f in _FIELDS[type(obj)])


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object Go's encoder writes for `obj`: struct order, `omitempty` applied."""
    out: dict[str, Any] = {}
    for f in _FIELDS[type(obj)]:
        value = getattr(obj, f.key)
        if f.omitempty and is_empty(value):
            continue
        kind = f.go
        if kind.startswith("*struct:") or kind.startswith("struct:"):
            if value is not None:
                value = encode(value)
        elif kind.startswith("[]*struct:") or kind.startswith("[]struct:"):
            value = [encode(v) if v is not None else None for v in value]
        elif kind == "map" and value is not None:
            value = dict(sorted(value.items()))
        out[f.key] = value
    return out


def to_stored(obj: Any) -> dict[str, Any]:
    """Every field, zero values included, nested structs as objects: the form kept on disk
    (meta.json, consumer state)."""
    return dataclasses.asdict(obj)


def from_stored(cls: type[T], data: dict[str, Any]) -> T:
    """A struct read back from disk, perhaps written by an older pynatsd: missing fields get
    their zero value, unknown ones are ignored, nothing is validated (it was when written)."""
    kwargs: dict[str, Any] = {}
    for f in _FIELDS[cls]:
        value = data.get(f.key)
        if value is None:
            continue
        kind = f.go
        if kind.startswith("*struct:") or kind.startswith("struct:"):
            value = from_stored(_STRUCTS[kind.split(":", 1)[1]], value)
        elif kind.startswith("[]*struct:") or kind.startswith("[]struct:"):
            elem = _STRUCTS[kind.split(":", 1)[1]]
            value = [from_stored(elem, v) if v is not None else None for v in value]
        elif kind.startswith("[]"):
            value = list(value)
        elif kind == "map":
            value = dict(value)
        kwargs[f.key] = value
    return cls(**kwargs)


# -- strict decoding ----------------------------------------------------------------------------

_GO_NAMES = {
    "duration": "time.Duration",
    "time": "time.Time",
    "map": "map[string]string",
    "[]duration": "time.Duration",
}

_INT_RANGES = {
    "int": (-(2**63), 2**63 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
    "duration": (-(2**63), 2**63 - 1),
}

# Enum values Go keeps as the zero value, which `omitempty` then leaves out.
_ENUM_AS_ZERO = (("persist_mode", "default"), ("priority_policy", "none"))


class RawNumber(str):
    """A JSON number with a fraction or an exponent, kept as written (`json.loads(text,
    parse_float=RawNumber)`): Go refuses one for an integer field and quotes it as written."""


def json_kind(value: Any) -> str:
    """The JSON kind Go's decoder names in an UnmarshalTypeError."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def unmarshal_error(value: Any, path: str, go_type: str, element: bool = False) -> ApiError:
    """Go's UnmarshalTypeError text for `value` found at `path`."""
    kind = json_kind(value)
    if kind == "number" and (
        (isinstance(value, float) and not value.is_integer()) or (go_type == "uint64" and value < 0)
    ):
        kind = f"number {value}"
    where = path if element else f"Go struct field {path}"
    return errors.invalid_json(f"json: cannot unmarshal {kind} into {where} of type {go_type}")


def decode_int(value: Any, path: str, go_type: str, element: bool = False) -> int:
    """A JSON number decoded into a Go integer type, with Go's errors."""
    gname = _GO_NAMES.get(go_type, go_type)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise unmarshal_error(value, path, gname, element)
    if isinstance(value, float):
        if not value.is_integer():
            raise unmarshal_error(value, path, gname, element)
        value = int(value)
    lo, hi = _INT_RANGES[go_type]
    if not lo <= value <= hi:
        raise errors.invalid_json(
            f"json: cannot unmarshal number {value} into "
            f"{path if element else 'Go struct field ' + path} of type {gname}"
        )
    return int(value)


def _decode_list(value: Any, kind: str, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise unmarshal_error(value, path, "[]" + _GO_NAMES.get(kind[2:], kind[2:]))
    elem = kind[2:]
    out: list[Any] = []
    for i, v in enumerate(value):
        epath = f"{path}.{i}"
        if elem == "string":
            if not isinstance(v, str):
                raise unmarshal_error(v, epath, "string", element=True)
            out.append(v)
        elif elem == "duration":
            out.append(decode_int(v, epath, "duration", element=True))
        elif elem.startswith("*struct:") or elem.startswith("struct:"):
            name = elem.split(":", 1)[1]
            if v is None and elem.startswith("*"):
                out.append(None)
                continue
            if not isinstance(v, dict):
                raise unmarshal_error(v, epath, "server." + name, element=True)
            out.append(decode(_STRUCTS[name], v, path))
        else:
            raise AssertionError(elem)
    return out


def _decode_value(value: Any, f: Field, path: str) -> Any:
    kind = f.go
    if kind.startswith("enum:"):
        if f.key == "priority_policy" and (
            not isinstance(value, str) or value not in kind[5:].split(",")
        ):
            # PriorityPolicy's UnmarshalJSON words it differently from the other enums.
            raise errors.invalid_json(f"unknown priority policy: {json.dumps(value)}")
        if not isinstance(value, str) or value not in kind[5:].split(","):
            # Go's UnmarshalJSON of these enums: `can not unmarshal %q` of the raw JSON.
            raise errors.invalid_json(f"can not unmarshal {json.dumps(json.dumps(value))}")
        if (f.key, value) in _ENUM_AS_ZERO:
            return ""
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise unmarshal_error(value, path, "string")
        return value
    if kind == "time":
        if not isinstance(value, str):
            raise unmarshal_error(value, path, "time.Time")
        try:
            return format_go_time(*parse_go_time(value))
        except ValueError:
            raise errors.invalid_json(
                f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": '
                f'cannot parse "{value}" as "2006"'
            ) from None
    if kind == "bool":
        if not isinstance(value, bool):
            raise unmarshal_error(value, path, "bool")
        return value
    if kind in _INT_RANGES:
        return decode_int(value, path, kind)
    if kind.startswith("[]"):
        return _decode_list(value, kind, path)
    if kind == "map":
        if not isinstance(value, dict):
            raise unmarshal_error(value, path, "map[string]string")
        for k, v in value.items():
            if not isinstance(v, str):
                raise unmarshal_error(v, f"{path}.{k}", "string")
        return dict(value)
    if kind.startswith("*struct:") or kind.startswith("struct:"):
        name = kind.split(":", 1)[1]
        if not isinstance(value, dict):
            raise unmarshal_error(value, path, "server." + name)
        return decode(_STRUCTS[name], value, path)
    raise AssertionError(kind)


def decode(
    cls: type[T],
    raw: dict[str, Any],
    path: str,
    extra: dict[str, str] | None = None,
    extra_out: dict[str, Any] | None = None,
) -> T:
    """Decode a JSON object into the struct `cls` as Go's strict decoder would: an unknown
    field is an error, JSON null leaves the zero value. `extra` names the fields of a request
    wrapper around the struct (key -> Go type); their values go into `extra_out`."""
    fields = _BY_KEY[cls]
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        f = fields.get(key)
        if f is None:
            if extra is not None and key in extra:
                if value is not None:
                    decoded = _decode_value(value, Field(key, extra[key]), f"{path}.{key}")
                    if extra_out is not None:
                        extra_out[key] = decoded
                continue
            raise errors.invalid_json(f'json: unknown field "{key}"')
        if value is None:
            if key == "priority_policy":
                raise errors.invalid_json("unknown priority policy: null")
            if f.go.startswith("enum:"):
                raise errors.invalid_json('can not unmarshal "null"')
            continue
        kwargs[key] = _decode_value(value, f, f"{path}.{key}")
    return cls(**kwargs)
