"""intervals: half-open intervals, pagination and calendar helpers."""

from intervals.core import Interval, merge
from intervals.dates import add_months, business_days
from intervals.paginate import Page, paginate

__all__ = ["Interval", "Page", "add_months", "business_days", "merge", "paginate"]
