"""tests/bench/:

bench/ scripts run end to end at tiny sizes (hang guards and table format). The
figures themselves are measured by the scripts, not asserted here.
"""
