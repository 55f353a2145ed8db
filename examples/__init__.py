"""Example workflows served by `perdure dev`'s example worker."""
