"""The package version (its own module: importing it does not import the package API)."""

__version__ = "0.1.0"
