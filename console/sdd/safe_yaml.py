"""YAML from a project (tickets, bernstein.yaml, role and mission files), loaded within limits.

A project's YAML is data from anyone who can write to it. PyYAML's safe loader
runs no code, but it follows anchors and aliases: 300 bytes of nested aliases
("billion laughs") stand for billions of values, cheap to hold (aliases share
one object) and ruinous to walk, print or copy. `load_yaml` measures the size the
document has with every alias expanded, on the parsed node graph before a
Python value is built, and refuses it past MAX_YAML_NODES (and refuses an alias
that contains itself); the text itself is capped at MAX_YAML_CHARS, and lists and
maps may nest MAX_YAML_DEPTH deep.
"""

from __future__ import annotations

from typing import Any

import yaml

#: characters of one YAML document (tickets and bernstein.yaml are read up to 1 MiB too)
MAX_YAML_CHARS = 1024 * 1024
#: values (scalars, lists, maps) in one document with every alias expanded
MAX_YAML_NODES = 100_000
#: lists and maps inside one another (libyaml's composer recurses: 40,000 levels of
#: `[[[…` in an 80 KB ticket overflow the C stack and kill the process)
MAX_YAML_DEPTH = 100

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlLimitError(yaml.YAMLError):
    """A document past a limit; `str()` is the one-line reason."""


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` within the limits; YamlLimitError (a yaml.YAMLError) past them."""
    if len(text) > MAX_YAML_CHARS:
        raise YamlLimitError(f"YAML of {len(text)} characters, over the limit "
                             f"({MAX_YAML_CHARS})")
    check_depth(text)
    loader = _Loader(text)
    try:
        if "*" not in text:  # no alias: nothing expands, the text's size bounds the value
            return loader.get_single_data()
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def check_depth(text: str, limit: int = MAX_YAML_DEPTH) -> None:
    """YamlLimitError when lists and maps nest deeper than `limit`, found from the parser's
    events (an iterative state machine) before anything recursive sees the document."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > limit:
                    line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                    raise YamlLimitError(f"lists and maps nested more than {limit} deep "
                                         f"(line {line})")
            elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) refuses deep flow nesting while it
        # scans ahead, before our count sees the events: the same limit, said the same way
        if "nesting depth" not in str(exc.problem or "") or isinstance(exc, YamlLimitError):
            raise
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else "?"
        raise YamlLimitError(f"lists and maps nested more than {limit} deep (line "
                             f"{line})") from None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node, limit: int = MAX_YAML_NODES) -> int:
    """How many values the node graph stands for with every alias expanded (each shared
    node counted once per reference, computed once); YamlLimitError past `limit` or on
    an alias inside itself. Iterative: a deeply nested document cannot overflow the stack."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the ancestors of the node being walked
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > limit:
                raise YamlLimitError(f"aliases expand to more than {limit} values (line "
                                     f"{node.start_mark.line + 1})")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_nodes:
                raise YamlLimitError(f"an alias refers to a value that contains it (line "
                                     f"{child.start_mark.line + 1})")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]
