"""A run from the coordinator's side: pre-flight, measuring, resume, retest, run files."""
