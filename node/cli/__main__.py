"""`python -m gaml.node.cli`: the same entry point as the `gaml` command."""

from gaml.node.cli.main import main

main()
