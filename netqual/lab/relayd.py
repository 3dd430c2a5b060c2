"""Entry point of the relay process: ``python -m netqual.lab.relayd CONFIG.json``.

Separate from ``relay`` so that ``-m`` does not re-execute a module the package has
already imported.
"""

from __future__ import annotations

import sys

from netqual.lab.relay import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
