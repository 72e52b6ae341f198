"""A package for `pystrobe run -m pkgdemo DURATION`: see __main__.py."""
