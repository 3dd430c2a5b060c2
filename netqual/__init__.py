"""netqual: network pre-flight qualification for remote KV-cache offload."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("netqual")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+src"

__all__ = ["__version__"]
