"""Half-open intervals [start, end)."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    """The half-open interval [start, end): ``start`` is included, ``end`` is not."""

    start: float
    end: float

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"interval end {self.end} is before its start {self.start}")

    @property
    def length(self):
        return self.end - self.start

    def contains(self, point):
        return self.start <= point < self.end

    def overlaps(self, other):
        """True when the two intervals share at least one point."""
        return self.start < other.end and other.start < self.end

    def intersection(self, other):
        """The common part, or ``None`` when they do not overlap."""
        if not self.overlaps(other):
            return None
        return Interval(max(self.start, other.start), min(self.end, other.end))


def merge(intervals):
    """Merge overlapping or touching intervals; the result is sorted and disjoint.

    >>> merge([Interval(5, 7), Interval(1, 3), Interval(2, 4)])
    [Interval(start=1, end=4), Interval(start=5, end=7)]
    """
    merged = []
    for interval in sorted(intervals):
        if merged and interval.start <= merged[-1].end:
            last = merged.pop()
            interval = Interval(last.start, max(last.end, interval.end))
        merged.append(interval)
    return merged
