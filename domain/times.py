"""ISO 8601 timestamps in UTC with milliseconds, the only time shape the service speaks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from domain.rules import DAY_MS

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def format_ms(epoch_ms: int) -> str:
    # Whole milliseconds from the epoch, so no float rounding; years below 1000 keep four digits.
    moment = EPOCH + timedelta(milliseconds=epoch_ms)
    return f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_ms(text: object) -> int | None:
    """Epoch milliseconds of an ISO 8601 string with a timezone; None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return round(moment.timestamp() * 1000)


def day_start_ms(epoch_ms: int) -> int:
    return epoch_ms - epoch_ms % DAY_MS


def parse_day(text: str) -> int | None:
    """Epoch milliseconds of the start of a `YYYY-MM-DD` day in UTC; None when it is not one."""
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None
    return round(day.timestamp() * 1000)
