"""Checks for developers and CI (``python -m netqual.devtools.layers``); never imported by
the tool itself."""
