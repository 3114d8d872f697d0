"""Reports: the paper's figures (PNG + PDF + CSV) and the self-contained ``report.html``.

- ``figures.py``: one drawing function per experiment, from the run tables.
- ``html.py``: the report page (claims table, disagreements, figures, settings, environment).
"""
