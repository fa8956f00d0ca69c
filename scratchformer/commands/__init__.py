"""One module per `scratchformer` subcommand: add_parser(subparsers) and run(args) -> exit status."""
