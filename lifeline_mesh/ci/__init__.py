"""One CI job on the mesh (``lifeline-mesh ci``): enroll, pull, context, run, sync back."""
