"""The ``rankcollapse`` command: one thin sub-command per Python API entry point.

``app.py`` holds the Typer app; each sub-command lives in its own module, registered by
``main.py``. Every user error becomes one line on stderr and exit code 2.
"""
