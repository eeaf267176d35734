"""The local OpenAI-compatible model server (own entry point, own process)."""
