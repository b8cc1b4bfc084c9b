"""mrbench harness: registries, configuration, records, command line, backends.

Importing this package imports neither torch nor any optional backbone.
"""

__version__ = "0.1.0"
