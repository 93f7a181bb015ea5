"""The one YAML loader localjury reads files with: PyYAML's safe loader, bounded.

Every YAML file the tool reads (models.yaml, judge profiles, criteria and rubric files) goes
through :func:`load_bounded`, by way of :func:`localjury._files.read_yaml`. PyYAML's safe
loader runs no code, but it keeps anchors and aliases: ``&a [*b, *b, ...]`` nested ten deep is
a 1 KB file that stands for 10^10 values. PyYAML itself shares the aliased objects, so loading
is cheap; whatever walks the result afterwards (pydantic's validation, a profile's hash, a
prompt) copies each use, and runs out of memory. Nesting hundreds deep is the same kind of
trap for the walks that recurse (pydantic's serializer stops at a few hundred levels with a
ValueError). So a document is composed (its node graph, aliases still shared), measured, and
only then constructed:

- the file is at most :data:`MAX_YAML_BYTES` bytes (read no further than that);
- its values, each alias counted again at every use, are at most :data:`MAX_YAML_VALUES`
  (mapping keys, list items and scalars, collections included) and hold at most
  :data:`MAX_YAML_CHARS` characters of scalar text;
- it nests at most :data:`MAX_YAML_DEPTH` levels, aliases followed;
- no alias names a collection it is inside (a cycle, which PyYAML would construct).

The bounds are those of a file written without aliases, so an alias may save typing (an
anchor reused, a ``<<: *defaults`` merge key in models.yaml) but never stand for more than a
file could hold. The measure is memoised per node: its cost is the composed document's size.
"""

from __future__ import annotations

from typing import Any

import yaml

#: The largest YAML file read: 64 MiB. The largest legitimate ones are judge profiles, whose
#: labeled examples (records with their texts) are a few KiB each: tens of thousands of them
#: fit. PyYAML (pure Python) reads a few MiB a second, so this is also about the longest read
#: worth waiting for.
MAX_YAML_BYTES = 64 << 20
#: The most characters of scalar text a document may hold, its aliases expanded: what a file
#: of :data:`MAX_YAML_BYTES` bytes could hold without them (a character takes a byte or more).
MAX_YAML_CHARS = MAX_YAML_BYTES
#: The most values (collections, keys, items, scalars) a document may hold, its aliases
#: expanded. A composed value takes about 600 bytes in PyYAML, so composing stays under
#: 300 MiB; a profile's labeled example is about 17 values, so 30,000 of them fit.
MAX_YAML_VALUES = 500_000
#: The deepest nesting read, in levels of values (``{a: [x]}``: 3), aliases followed. The
#: deepest file localjury writes or documents (a profile's ``calibrators[].held_out``) is 6
#: levels; 64 leaves room for free-form data and stays far below the recursion limits of the
#: code that walks the result (Python's 1,000 frames; pydantic's serializer, a few hundred).
MAX_YAML_DEPTH = 64


class YamlBoundError(Exception):
    """A YAML document over one of the bounds; the message says which, and where."""


def _where(node: yaml.Node) -> str:
    return f"the value at line {node.start_mark.line + 1}"


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses, while composing, a document of more values than
    :data:`MAX_YAML_VALUES` or nested deeper than :data:`MAX_YAML_DEPTH` (aliases not yet
    followed: :func:`_measure` does that), before it holds them all or recurses too deep."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._values = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._values += 1
        if self._values > MAX_YAML_VALUES:
            raise YamlBoundError(
                f"holds more than {MAX_YAML_VALUES:,} values (keys, items and scalars), the bound on a YAML file; "
                "make it smaller"
            )
        if self._depth >= MAX_YAML_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise YamlBoundError(
                f"line {line} is nested more than {MAX_YAML_DEPTH} levels deep, the bound on a YAML file; flatten it"
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _too_deep(node: yaml.Node) -> YamlBoundError:
    return YamlBoundError(
        f"{_where(node)} is nested more than {MAX_YAML_DEPTH} levels deep (aliases followed), the bound on a "
        "YAML file; flatten it"
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _measure(root: yaml.Node) -> None:
    """Refuse a composed document whose values, characters or depth, each alias followed at
    every use, go over the bounds, or that holds a cycle. Each node is measured once
    (memoised by identity), so the work is the composed graph's size, not the expanded one's.

    Raises:
        YamlBoundError: Naming the bound and the line of the value that goes over it.
    """
    sizes: dict[int, tuple[int, int, int]] = {}  # id(node) -> (values, characters, height)
    inside: set[int] = set()  # the collections on the path being measured

    def walk(node: yaml.Node, depth: int) -> tuple[int, int, int]:
        key = id(node)
        if key in inside:
            raise YamlBoundError(
                f"{_where(node)} holds an alias to a collection it is inside (a cycle); remove the alias"
            )
        if key not in sizes:
            if depth > MAX_YAML_DEPTH:
                raise _too_deep(node)
            values, chars, height = 1, len(node.value) if isinstance(node, yaml.ScalarNode) else 0, 0
            inside.add(key)
            for child in _children(node):
                v, c, h = walk(child, depth + 1)
                values, chars, height = values + v, chars + c, max(height, h)
                if values > MAX_YAML_VALUES or chars > MAX_YAML_CHARS:
                    much = (
                        f"{MAX_YAML_VALUES:,} values" if values > MAX_YAML_VALUES else f"{MAX_YAML_CHARS:,} characters"
                    )
                    raise YamlBoundError(
                        f"{_where(node)} expands, each alias counted at every use, to more than {much}, the bound on "
                        "a YAML file; use fewer aliases"
                    )
            inside.discard(key)
            sizes[key] = (values, chars, height + 1)
        values, chars, height = sizes[key]
        if depth + height - 1 > MAX_YAML_DEPTH:
            raise _too_deep(node)
        return values, chars, height

    walk(root, 1)


def compose_bounded(text: str) -> yaml.Node | None:
    """The node graph of a YAML document (None for an empty one), within the bounds.

    Raises:
        YamlBoundError: The document goes over a bound (see the module docstring).
        yaml.YAMLError: It is not valid YAML.
    """
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _measure(node)
        return node
    finally:
        loader.dispose()


def load_bounded(text: str) -> Any:
    """Parse a YAML document as PyYAML's ``safe_load`` does, refusing one over the bounds
    before any of it is constructed.

    Raises:
        YamlBoundError: The document goes over a bound (see the module docstring).
        yaml.YAMLError: It is not valid YAML (or holds a tag the safe loader refuses).
        ValueError: A scalar PyYAML cannot convert (a 5000-digit integer, a date like 2024-13-01).
    """
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()
