"""python -m service.models [--host 127.0.0.1] [--port 8001]"""

from __future__ import annotations

import argparse
import os
import sys

from service.tracing._config import propagators_refused


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m service.models", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    # before FastAPI is imported (it loads OTEL_PROPAGATORS' propagators): one line, not a
    # traceback, as `solr-rag` says it
    refused = propagators_refused(os.environ)
    if refused:
        sys.exit(f"python -m service.models: {refused}")
    import uvicorn

    from service.models.server import create_model_app

    uvicorn.run(create_model_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
