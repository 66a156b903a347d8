"""A YAML loader with limits: configuration is small, so a document nested deeper than :data:`MAX_DEPTH` or whose
aliases expand to more than :data:`MAX_VALUES` values is refused while it is parsed, before anything walks it.

PyYAML composes nested nodes recursively (a few thousand ``[`` overflow Python's stack), and an alias is one shared
node however often it is used, so nine levels of nine aliases ("billion laughs") parse from under 1 KB into a
structure of 387 million values that every later step (overrides, validation, messages) walks in full. The depth is
counted while composing; the expanded size, expanded depth and self-reference once the document is composed, by one
pass over its node graph that visits each shared node once.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists accepted (the configuration itself is 3 levels deep)."""

MAX_VALUES = 100_000
"""Most values (scalars, lists, mappings) a document may hold once its aliases are expanded."""


class YamlLimitError(yaml.YAMLError):
    """The document is valid YAML but exceeds :data:`MAX_DEPTH` or :data:`MAX_VALUES`, or refers to itself."""


def _where(node: Node | Any) -> str:
    mark = getattr(node, "start_mark", None)
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


class BoundedLoader(yaml.SafeLoader):
    """:class:`yaml.SafeLoader` refusing documents beyond :data:`MAX_DEPTH` and :data:`MAX_VALUES`."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(f"nested deeper than {MAX_DEPTH} levels{_where(self.peek_event())}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Node | None:
        node = super().get_single_node()
        if node is not None:
            _measure(node, 1, {}, set())
        return node


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _measure(node: Node, level: int, seen: dict[int, tuple[int, int]], open_: set[int]) -> tuple[int, int]:
    """``(values, depth)`` of ``node`` with aliases expanded; raises as soon as a limit is passed.

    ``seen`` memoises shared (aliased) nodes, so the pass costs one visit per node written, not per value expanded;
    ``open_`` holds the nodes on the current path (a node met again on it is an alias to itself).
    """
    key = id(node)
    if key in seen:
        values, depth = seen[key]
        if level + depth - 1 > MAX_DEPTH:
            raise YamlLimitError(f"aliases nest deeper than {MAX_DEPTH} levels{_where(node)}")
        return values, depth
    if key in open_:
        raise YamlLimitError(f"an alias refers to itself{_where(node)}")
    if level > MAX_DEPTH:
        raise YamlLimitError(f"aliases nest deeper than {MAX_DEPTH} levels{_where(node)}")
    open_.add(key)
    values, depth = 1, 1
    for child in _children(node):
        child_values, child_depth = _measure(child, level + 1, seen, open_)
        values += child_values
        depth = max(depth, child_depth + 1)
        if values > MAX_VALUES:
            raise YamlLimitError(f"aliases expand to more than {MAX_VALUES:,} values{_where(node)}")
    open_.discard(key)
    seen[key] = (values, depth)
    return values, depth
