"""ragscale's version: one definition, read by the package (``ragscale.__version__``), the wheel's
metadata (pyproject.toml) and the reports that name the version that wrote them."""

__version__ = "0.1.0"
