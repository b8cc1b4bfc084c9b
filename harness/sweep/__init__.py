"""``mrbench sweep``: many cells from one grid file, run and resumed by an executor.

- :mod:`harness.sweep.grid`       the grid file, its expansion into cells, their record directories
- :mod:`harness.sweep.status`     pending / running / failed / finished, read from the records
- :mod:`harness.sweep.cellproc`   one cell as a subprocess (stdlib only: Ray ships it by value)
- :mod:`harness.sweep.executors`  inline and local (subprocess slots) executors
- :mod:`harness.sweep.ray_executor`  Ray tasks, on a local Ray instance or a cluster
- :mod:`harness.sweep.command`    the command: dry run, status table, running with progress
"""
