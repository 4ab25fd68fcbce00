"""The package's version, in a module of its own so that a stack can read it without importing
the package root (whose type-checking imports reach the stacks)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
