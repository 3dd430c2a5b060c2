"""tests/cli/:

What a user sees from one command, run in-process (cli_helpers.run_in_process) or as
a child process on files the test writes: output pinned at NETQUAL_WIDTH, exit codes,
files written. No agents. Fast lane with unit/.
"""
