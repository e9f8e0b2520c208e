"""Instants written as ISO-8601 text (`--export-time`, evidence times): the one parser.

Every time of the audit is UTC: a text that names no zone, like a naive datetime, is read as UTC,
whatever the zone of the machine or the Spark session.
"""

from __future__ import annotations

import datetime as dt

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_instant(value: dt.datetime | str) -> dt.datetime:
    """An instant as an aware datetime: ISO-8601 text or a datetime, UTC when it names no zone.

    Args:
        value: "2026-11-21T03:00:00Z", "2026-11-21 03:00:00", "...+01:00", or a datetime.

    Returns:
        The aware datetime.

    Raises:
        ValueError: when the text is not an ISO-8601 time.
    """
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def epoch_micros(value: dt.datetime | str) -> int:
    """Microseconds since the epoch of an instant (`parse_instant`), exact.

    Raises:
        ValueError: when the text is not an ISO-8601 time.
    """
    return (parse_instant(value) - _EPOCH) // dt.timedelta(microseconds=1)


def epoch_millis(value: dt.datetime | str) -> int:
    """Milliseconds since the epoch of an instant (`parse_instant`), rounded down.

    Raises:
        ValueError: when the text is not an ISO-8601 time.
    """
    return (parse_instant(value) - _EPOCH) // dt.timedelta(milliseconds=1)
