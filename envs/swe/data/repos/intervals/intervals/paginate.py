"""Splitting a sequence into pages."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    items: list
    number: int  # 1-based
    pages: int  # how many pages there are in all

    @property
    def has_next(self):
        return self.number < self.pages

    @property
    def has_previous(self):
        return self.number > 1


def page_count(total, per_page):
    """How many pages ``total`` items fill, ``per_page`` a page (at least one page)."""
    if per_page < 1:
        raise ValueError("per_page must be positive")
    return max(1, -(-total // per_page))


def paginate(items, number, per_page=10):
    """Page ``number`` (1-based) of ``items``. Pages past the end raise ``IndexError``."""
    pages = page_count(len(items), per_page)
    if not 1 <= number <= pages:
        raise IndexError(f"page {number} is out of range 1..{pages}")
    start = (number - 1) * per_page
    return Page(items=list(items[start : start + per_page]), number=number, pages=pages)
