"""The version of localjury: a leaf module, so that nothing imports the package's __init__ for it."""

__version__ = "0.1.0"
