"""Peers measured beside Perdure, each in a process of its own (optional extras)."""
