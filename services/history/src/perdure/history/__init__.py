"""Perdure's history service: the only writer of the journal."""
