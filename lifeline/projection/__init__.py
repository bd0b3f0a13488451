"""A line as markdown (``LIFELINE.md``): rendered, extended in place, read back."""
