"""Planning: the inventory, the plan, pairs and rounds, bulk budgets and the estimate.

Pure functions of the inputs; nothing here opens a socket or writes a file.
"""
