"""The edge: what meets the user's files, values and terminal, parsed and checked once.

- ``errors``       :class:`RankCollapseError`, the one user error (one line; exit 2 at the command line)
- ``inputs``       the one input opener: a user's file read once (regular files only, size caps, one-line
                   OS errors)
- ``validate``     checks of a user's value (types, ranges, shapes, finiteness, memory) and quoting it
- ``atomic``       every file written: a unique temporary beside the target, renamed on success
- ``folder``       the one output layer: a command's folder (marker, lock, staging, manifest, publish)
- ``figures``      every figure: one set-up (not registered with pyplot), one dpi, one save (atomic,
                   one-line errors)
- ``runs``         a run's ``config.json`` and streamed ``metrics.csv``
- ``provenance``   the package versions recorded beside a run
- ``progress``     progress lines on stderr
- ``runtime``      heap settings for long float64 runs
- ``network``      no network without asking: the hub library offline for the whole process until downloads
                   are allowed
"""
