"""Perdure's scheduler service: tasks, leases, fencing tokens and timers."""
