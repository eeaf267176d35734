"""Each stage on its own, with its real inputs: no HTTP to the service."""
