"""Shortest paths: breadth-first (unweighted) and Dijkstra (non-negative weights)."""

import heapq
import itertools
from collections import deque


def shortest_path(graph, source, target):
    """Fewest-edges path from ``source`` to ``target`` in ``{node: [neighbours]}``, or ``None``."""
    previous = {source: None}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        if node == target:
            path = []
            while node is not None:
                path.append(node)
                node = previous[node]
            return path[::-1]
        for neighbour in graph.get(node, ()):
            if neighbour not in previous:
                previous[neighbour] = node
                queue.append(neighbour)
    return None


def dijkstra(graph, source, target):
    """Cheapest path in ``{node: {neighbour: weight}}``: ``(cost, path)``, or ``None`` if unreachable.

    Weights must be non-negative. Nodes need not be orderable: ties are broken by insertion order.
    """
    best = {source: 0}
    previous = {}
    counter = itertools.count()
    heap = [(0, next(counter), source)]
    while heap:
        cost, _, node = heapq.heappop(heap)
        if node == target:
            path = [node]
            while path[-1] != source:
                path.append(previous[path[-1]])
            return cost, path[::-1]
        if cost > best[node]:
            continue
        for neighbour, weight in graph.get(node, {}).items():
            if weight < 0:
                raise ValueError(f"negative weight on edge {node} -> {neighbour}")
            candidate = cost + weight
            if candidate < best.get(neighbour, float("inf")):
                best[neighbour] = candidate
                previous[neighbour] = node
                heapq.heappush(heap, (candidate, next(counter), neighbour))
    return None
