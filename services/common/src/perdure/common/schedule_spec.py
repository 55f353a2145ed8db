"""When a schedule's slots are: a standard 5-field cron expression in UTC, or every N whole
seconds from the Unix epoch plus an offset. The gateway checks a spec with `parse`; history
walks its slots with `next_slot` on the database clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import CroniterBadDateError, CroniterError, croniter

from perdure.common import errors

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_CRON_LENGTH = 200
MAX_INTERVAL_SECONDS = 10 * 365 * 24 * 3600  # ten years


@dataclass(frozen=True)
class Spec:
    """A schedule's spec: `cron`, or `interval` seconds with `offset`."""

    cron: str | None = None
    interval: int | None = None
    offset: int = 0

    def next_slot(self, after: datetime) -> datetime | None:
        """The first slot strictly after `after` (aware); None if there is none."""
        if self.interval is not None:
            elapsed = (after - EPOCH - timedelta(seconds=self.offset)).total_seconds()
            index = int(elapsed // self.interval) + 1
            return EPOCH + timedelta(seconds=self.offset + index * self.interval)
        assert self.cron is not None
        try:
            slot = croniter(self.cron, after.astimezone(UTC)).get_next(datetime)
        except CroniterBadDateError:  # a date that never comes (Feb 30)
            return None
        assert isinstance(slot, datetime)
        return slot.astimezone(UTC)

    def first_slot_from(self, moment: datetime) -> datetime | None:
        """The first slot at or after `moment`."""
        return self.next_slot(moment - timedelta(microseconds=1))

    def slots(self, after: datetime, count: int) -> list[datetime]:
        """The next `count` slots strictly after `after`."""
        found: list[datetime] = []
        slot: datetime | None = after
        while len(found) < count and slot is not None:
            slot = self.next_slot(slot)
            if slot is not None:
                found.append(slot)
        return found

    def count_slots(self, start: datetime, end: datetime, limit: int = 100_000) -> int:
        """How many slots lie in [start, end) (at most `limit` are walked: a cron's are
        counted one by one; an interval's by arithmetic)."""
        if end <= start:
            return 0
        if self.interval is not None:
            first = self.first_slot_from(start)
            assert first is not None
            if first >= end:
                return 0
            return int((end - first).total_seconds() - 1e-9) // self.interval + 1
        counted = 0
        slot = self.first_slot_from(start)
        while slot is not None and slot < end and counted < limit:
            counted += 1
            slot = self.next_slot(slot)
        return counted


def parse(cron: str, interval_seconds: float | None, offset_seconds: float) -> Spec:
    """A spec from a request's fields (exactly one of `cron` and `interval_seconds`), or
    INVALID_ARGUMENT naming what is wrong and how to write it."""
    if bool(cron) == (interval_seconds is not None):
        raise errors.invalid_argument(
            "spec needs exactly one of cron (e.g. '*/5 * * * *') and interval (e.g. 60s)"
        )
    if interval_seconds is not None:
        return _interval(interval_seconds, offset_seconds)
    if offset_seconds:
        raise errors.invalid_argument("spec.offset goes with spec.interval, not with spec.cron")
    return _cron(cron)


def _interval(interval: float, offset: float) -> Spec:
    if interval != int(interval) or not 1 <= interval <= MAX_INTERVAL_SECONDS:
        raise errors.invalid_argument(
            f"spec.interval must be a whole number of seconds from 1 s to ten years, not "
            f"{interval:g}s"
        )
    if offset != int(offset) or not 0 <= offset < interval:
        raise errors.invalid_argument(
            f"spec.offset must be a whole number of seconds from 0 to less than the interval "
            f"({interval:g}s), not {offset:g}s"
        )
    return Spec(interval=int(interval), offset=int(offset))


def _cron(cron: str) -> Spec:
    shown = cron[:60]
    if len(cron) > MAX_CRON_LENGTH or not cron.isprintable():
        raise errors.invalid_argument(
            f"spec.cron must be printable and at most {MAX_CRON_LENGTH} characters"
        )
    fields = cron.split()
    if len(fields) != 5:
        raise errors.invalid_argument(
            f"spec.cron {shown!r} has {len(fields)} fields; write the standard 5 (minute hour "
            "day-of-month month day-of-week, in UTC), e.g. '0 9 * * 1-5'"
        )
    try:
        croniter(" ".join(fields), EPOCH)
    except (CroniterError, ValueError, KeyError) as error:
        raise errors.invalid_argument(
            f"spec.cron {shown!r} is not a valid cron expression ({error}); fields are minute "
            "0-59, hour 0-23, day-of-month 1-31, month 1-12 or jan-dec, day-of-week 0-6 or "
            "sun-sat, each *, a value, a range a-b, a list a,b or a step */n"
        ) from None
    spec = Spec(cron=" ".join(fields))
    if spec.next_slot(datetime.now(UTC)) is None:
        raise errors.invalid_argument(f"spec.cron {shown!r} never fires (no such date)")
    return spec
