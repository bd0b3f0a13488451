"""`python -m lifeline` runs the `lifeline` CLI."""

from lifeline.cli.main import main

main()
