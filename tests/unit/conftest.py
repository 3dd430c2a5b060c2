"""tests/unit/:

One layer at a time, in-process: records, rules, codecs, planning, fakes of the layer
below (fake verbs, sysfs trees the test builds). No agent processes, no root. Put a
test in unit/<package>/ after the netqual package it tests. Fast lane with cli/.
"""
