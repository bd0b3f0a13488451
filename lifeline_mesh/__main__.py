"""`python -m lifeline_mesh` runs the `lifeline-mesh` CLI."""

from lifeline_mesh.cli.main import main

main()
