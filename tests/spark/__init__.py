"""Spark tests (a package, so that its conftest does not shadow tests/conftest.py, which other
test modules import as `conftest`)."""
