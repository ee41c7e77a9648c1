"""Topological order of a dependency graph ``{node: {dependencies}}``."""

import heapq


class CycleError(ValueError):
    def __init__(self, cycle):
        super().__init__("dependency cycle: " + " -> ".join(map(str, cycle)))
        self.cycle = cycle


def _nodes(graph):
    """Every node: the keys, and nodes that appear only as dependencies."""
    nodes = set(graph)
    for dependencies in graph.values():
        nodes.update(dependencies)
    return nodes


def find_cycle(graph):
    """A cycle as a list ``[a, b, ..., a]``, or ``None`` when the graph is acyclic."""
    visiting, done = set(), set()
    stack = []

    def visit(node):
        visiting.add(node)
        stack.append(node)
        for dependency in sorted(graph.get(node, ())):
            if dependency in visiting:
                return stack[stack.index(dependency):] + [dependency]
            if dependency not in done:
                cycle = visit(dependency)
                if cycle:
                    return cycle
        visiting.discard(node)
        done.add(node)
        stack.pop()
        return None

    for node in sorted(_nodes(graph)):
        if node not in done:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def toposort(graph):
    """Nodes ordered so that every node comes after its dependencies.

    Ties are broken by sorting, so the order is deterministic. Raises :class:`CycleError`.
    """
    cycle = find_cycle(graph)
    if cycle:
        raise CycleError(cycle)
    nodes = _nodes(graph)
    remaining = {node: set(graph.get(node, ())) for node in nodes}
    dependents = {node: set() for node in nodes}
    for node, dependencies in remaining.items():
        for dependency in dependencies:
            dependents[dependency].add(node)
    ready = [node for node, dependencies in remaining.items() if not dependencies]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for dependent in dependents[node]:
            remaining[dependent].discard(node)
            if not remaining[dependent]:
                heapq.heappush(ready, dependent)
    return order
