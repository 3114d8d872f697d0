"""Every task of every story: thin adapters over the packages that measure, one module per package reached.

A task turns one grid point's params into a lower package's config, runs the measurement there (nothing
here measures) and returns rows the kit reads; each is declared with its cost estimate and identity facts
as an ``engine.tasks.Task``. This package is the kit's one door downwards: what a story needs of a lower
package (a closed form to compare with, a threshold, a drawing) it reaches through the module of that
package here, never directly.

- ``curves``: ``models.measure`` and ``dynamics.simulate``: per-layer curves of a model or the simulator,
  the plain ``simulate`` / ``analyze`` of custom sweeps, the shared execution settings and cost constants;
- ``notions``: ``dynamics.notions`` (two notions of collapse on one simulator run);
- ``rollout``: ``models.rollout`` (attention rollout, influence profiles, sinks) and the statistics of a
  profile (``metrics.influence``, ``metrics.cesaro``);
- ``key_bias``: ``models.key_bias`` (the sink measure and the key-bias values per excerpt, layer and head);
- ``jacobian``: ``models.jacobian`` (Jacobian influence profiles);
- ``dyt``: ``models.dyt`` and ``equilibria.dyt`` (DyT fits, curves and equilibria);
- ``growth``: ``models.growth`` and ``metrics.growth`` (growth with depth);
- ``masks``: ``masks.hasse`` (composed flows) and the masks' closed forms;
- ``equilibria``: ``equilibria`` (the counterexample, Theorem 2's bounds, Theorem 3 and App. F) and its
  drawings and typed summaries;
- ``training``: ``monitor.trajectory`` (a small model trained from random init, probed every k steps).
"""
