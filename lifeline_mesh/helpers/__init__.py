"""Helper processes for the CPU-heavy checks of large received batches: the pool and the worker."""
