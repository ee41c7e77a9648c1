"""Calendar helpers on ``datetime.date``."""

import calendar
import datetime


def add_months(day, months):
    """The same day ``months`` later (or earlier); the day is clamped to the target month's end.

    >>> add_months(datetime.date(2024, 1, 31), 1)
    datetime.date(2024, 2, 29)
    """
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    last_day = calendar.monthrange(year, month + 1)[1]
    return datetime.date(year, month + 1, min(day.day, last_day))


def business_days(start, end, holidays=()):
    """Count Monday-to-Friday days in [start, end) that are not in ``holidays``."""
    if end < start:
        return -business_days(end, start, holidays)
    holidays = set(holidays)
    count = 0
    day = start
    while day < end:
        if day.weekday() < 5 and day not in holidays:
            count += 1
        day += datetime.timedelta(days=1)
    return count
