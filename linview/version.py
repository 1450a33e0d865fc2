"""The version of linview (also written into state files)."""

__version__ = "0.1.0"
