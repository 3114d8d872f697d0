"""Reports: the self-contained ``report.html`` of a reproduction.

- ``html.py``: the report page (claims table, disagreements, figures, settings, environment).

The figures themselves belong to the experiments' stories (``rankcollapse.experiments.stories``);
saving them is ``rankcollapse.experiments.plotting.save_figure``.
"""
