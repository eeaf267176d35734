"""python -m service.models [--host 127.0.0.1] [--port 8001]"""

from __future__ import annotations

import argparse

import uvicorn

from service.models.server import create_model_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m service.models", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    uvicorn.run(create_model_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
