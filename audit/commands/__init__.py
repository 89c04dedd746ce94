"""One module per ``wireup`` subcommand: ``NAME``, ``HELP``, ``add_arguments(parser)``, ``run(args)``.

Command modules keep their top-level imports light (the parser imports all of them); heavy work is
imported inside ``run``.
"""
