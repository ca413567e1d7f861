"""The `mappings` (or `maps`) block, at the top level (the global account's) and in each account,
as nats-server's `parseAccountMappings` and `parseAccountMapDest` (server/opts.go) read it:

    mappings {
      orders.new: orders.created             # one destination
      "cell.*.*": "cell.$2.$1"               # wildcards and their placements
      jobs: [{destination: jobs.a, weight: 60%}, {dest: jobs.b, weight: 40}]
      pinned: {dest: pinned.here, weight: 100%, cluster: east}
    }

Each mapping is checked as nats-server's `AddWeightedMappings` checks it (pynatsd.mappings), and
its errors carry nats-server's text and position.
"""

from __future__ import annotations

from pynatsd.config.parser import Node
from pynatsd.config.registry import Loader, config_key, conversion, want_map
from pynatsd.config.values import go_atoi, go_quote
from pynatsd.mappings import MappingError, build_mapping
from pynatsd.options import MapDest, SubjectMapping
from pynatsd.subjects import is_valid_subject


@config_key("mappings", "maps")
def _apply_mappings(loader: Loader, name: str, node: Node) -> None:
    loader.opts.mappings = parse_mappings(loader, node)


def parse_mappings(loader: Loader, node: Node) -> list[SubjectMapping]:
    """parseAccountMappings. A value of the wrong Go type ends the block (nats-server recovers
    the panic for the whole block): `Abort` propagates."""
    out: list[SubjectMapping] = []
    for source, entry in want_map(loader, node).items():
        if not is_valid_subject(source):
            loader.error(node, f"Subject {go_quote(source)} is not a valid subject")
            continue
        value = entry.value
        if isinstance(value, str):
            dests: tuple[MapDest, ...] = (MapDest(value, 100),)
            prefix = f"Error adding mapping for {go_quote(source)} to {go_quote(value)}"
        elif isinstance(value, list):
            parsed = [_parse_dest(loader, element) for element in value]
            dests = tuple(d for d in parsed if d is not None)
            prefix = f"Error adding mapping for {go_quote(source)}"
        else:
            one = _parse_dest(loader, entry)
            if one is None:
                continue
            dests = (one,)
            prefix = f"Error adding mapping for {go_quote(source)}"
        try:
            build_mapping(source, dests)
        except MappingError as e:
            loader.error(entry, f"{prefix} : {e}")
            continue
        out.append(SubjectMapping(source, dests))
    return out


def _parse_dest(loader: Loader, node: Node) -> MapDest | None:
    """parseAccountMapDest: one `{destination, weight, cluster}` map; None after an error."""
    if not isinstance(node.value, dict):
        loader.error(node, "Expected an entry for the mapping destination")
        return None
    subject = ""
    cluster = ""
    weight: int | None = None
    for key, field in node.value.items():
        lowered = key.lower()
        if lowered in ("dest", "destination"):
            subject = _want_str(loader, node, field)
        elif lowered == "weight":
            weight = _weight(loader, field)
            if weight is None:
                return None
        elif lowered == "cluster":
            cluster = _want_str(loader, node, field)
        else:
            loader.error(field, f"Unknown field {go_quote(key)} for mapping destination")
            return None
    if weight is None:
        loader.error(node, f"Missing weight for mapping destination {go_quote(subject)}")
        return None
    return MapDest(subject, weight, cluster)


def _want_str(loader: Loader, dest: Node, field: Node) -> str:
    """A failed string assertion panics out of the whole block; nats-server blames the
    destination (the last token the block itself unwrapped), not the field."""
    if not isinstance(field.value, str):
        raise loader.abort(dest, conversion(field, "string"))
    return field.value


def _weight(loader: Loader, node: Node) -> int | None:
    value = node.value
    if isinstance(value, str):
        text = value.removesuffix("%")
        try:
            weight = go_atoi(text)
        except ValueError:
            loader.error(node, f"Invalid weight {go_quote(text)} for mapping destination")
            return None
    elif isinstance(value, int) and not isinstance(value, bool):
        weight = value
    else:
        loader.error(node, f"Unknown entry type for weight of {_go_value(value)}\n")
        return None
    if weight > 100 or weight < 0:
        loader.error(node, f"Invalid weight {weight} for mapping destination")
        return None
    return weight


def _go_value(value: object) -> str:
    """Go's %v of a scalar (a float as strconv's shortest form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        text = repr(value)
        if "e" in text:
            mantissa, exponent = text.split("e")
            sign = exponent[0] if exponent[0] in "+-" else "+"
            digits = exponent.lstrip("+-").rjust(2, "0")
            return f"{mantissa}e{sign}{digits}"
        return text
    return str(value)
