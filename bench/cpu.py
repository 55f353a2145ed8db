"""CPU time spent by each part of the cluster, time stolen by the host, and a process's
resident memory (Linux /proc).

Wall-clock figures on a shared virtual machine move with the neighbours; the CPU each
process spent per step does not, so it is what to compare between runs and revisions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:  # gone, or not Linux
        return None
    return text[text.rindex(")") + 2 :].split()  # the command name may hold spaces


def process_seconds(pid: int, *, reaped_children: bool = False) -> float:
    """User + system CPU seconds of a process (and of its children it has reaped)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # After the name: state is field 3, utime 14, stime 15, cutime 16, cstime 17 (1-based).
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICKS


def resident_bytes(pid: int) -> tuple[int, int]:
    """A process's resident memory now and its peak so far (VmRSS, VmHWM), in bytes; zeros
    when it is gone."""
    try:
        lines = (_PROC / str(pid) / "status").read_text().splitlines()
    except OSError:
        return 0, 0
    found = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) * 1024  # reported in kB
    return found.get("VmRSS", 0), found.get("VmHWM", 0)


def children_of(parent: int) -> list[int]:
    """Live child processes of `parent`."""
    found = []
    for entry in _PROC.glob("[0-9]*"):
        fields = _stat_fields(int(entry.name))
        if fields is not None and int(fields[1]) == parent:
            found.append(int(entry.name))
    return found


def postgres_seconds(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster, its live backends and helpers, and
    those that exited (which the postmaster reaped)."""
    total = process_seconds(postmaster, reaped_children=True)
    return total + sum(process_seconds(pid) for pid in children_of(postmaster))


def steal_and_total() -> tuple[int, int]:
    """Host-stolen and total CPU ticks of this machine so far."""
    try:
        first = (_PROC / "stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0, 0
    ticks = [int(value) for value in first[:8]]
    return ticks[7], sum(ticks)


@dataclass(frozen=True)
class Sample:
    """CPU seconds per part of the cluster at one moment, and the machine's steal counters."""

    seconds: dict[str, float]
    stolen: int
    total: int

    def since(self, earlier: Sample) -> tuple[dict[str, float], float]:
        """CPU seconds per part between two samples, and the share of time stolen."""
        spent = {part: self.seconds[part] - earlier.seconds.get(part, 0.0) for part in self.seconds}
        elapsed = self.total - earlier.total
        return spent, (self.stolen - earlier.stolen) / elapsed if elapsed else 0.0


def sample(parts: dict[str, list[int]], postmaster: int | None) -> Sample:
    """CPU seconds of each named group of processes, and of PostgreSQL."""
    seconds = {part: sum(process_seconds(pid) for pid in pids) for part, pids in parts.items()}
    if postmaster is not None:
        seconds["postgres"] = postgres_seconds(postmaster)
    stolen, total = steal_and_total()
    return Sample(seconds, stolen, total)
