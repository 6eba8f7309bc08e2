"""Package version; the `writer` root attribute of every dump names it (pyproject.toml too)."""
__version__ = "0.2.0"
