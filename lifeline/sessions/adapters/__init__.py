"""One adapter per agent tool's transcript format, their port and their reading helpers."""
