"""The ``remark`` command line: one entry point, one module per subcommand (see :mod:`remark.cli.main`)."""
