"""Perdure's benchmark suite: `make bench` or `python -m bench` (see bench/__main__.py)."""
