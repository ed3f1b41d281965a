"""genlab's version: a leaf module, so core records it without importing the package root."""

__version__ = "0.1.0"
