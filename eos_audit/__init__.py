"""eos-audit: replay Kafka's idempotent/transactional producer validation over exported logs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eos-audit")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
