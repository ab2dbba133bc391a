"""The ``wgref`` subcommands, one module per command group, each with its handlers and argument parsers."""
