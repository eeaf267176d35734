"""The web layer: FastAPI routers over the pipeline."""
