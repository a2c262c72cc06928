"""``madrag serve``: start the web app and HTTP API (FastAPI under uvicorn)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from madrag.cli.options import RuntimeOpt, choice
from madrag.data.row_limit import MAX_ROWS
from madrag.errors import ConfigError
from madrag.providers.runtimes import DEFAULT_RUNTIME, LLAMA_RUNTIMES, LlamaRuntime
from madrag.retrieval.embedder import EMBEDDERS, EmbedderName

if TYPE_CHECKING:
    from madrag.server import ServerConfig

TOKEN_ENV = "MADRAG_SERVER_TOKEN"

HostOpt = Annotated[
    str,
    typer.Option(
        help="Address to bind. A loopback address (127.0.0.0/8, ::1, localhost) needs no token unless one is "
        "given and answers only loopback host names; any other address requires a token."
    ),
]
DataDirOpt = Annotated[
    Path | None,
    typer.Option(
        help="Where runs, rubrics and drafts live (default $MADRAG_SERVER_DIR or ~/.local/share); one server per "
        "data directory (a second one is refused)."
    ),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        help=f"Token every page and API call must carry (or ${TOKEN_ENV}); on a non-loopback address one is "
        "generated and printed once when none is given, and one given must have at least 16 characters and no "
        "spaces; on a loopback address none is needed unless given."
    ),
]
KeyEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="The environment variable holding a backend's API key when none is typed into a page: KIND=VAR for "
        "one backend (anthropic=TEAM_ANTHROPIC_KEY), VAR alone for the OpenAI-compatible one; again for more. "
        "A backend not named reads its own (OPENAI_API_KEY, ANTHROPIC_API_KEY). The key is sent only to its "
        "backend's own server (OpenAI's, Anthropic's) and to the URLs of --api-key-url, never to a URL a caller "
        "names.",
        metavar="VAR",
    ),
]
KeyUrlOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="A base URL the server's own API key (--api-key-env) is sent to besides its backend's own server: "
        "KIND=URL for one backend, URL alone for the OpenAI-compatible one; again for more. Runs may reach it.",
        metavar="URL",
    ),
]
AllowUrlOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="A model server runs and connection tests may reach (its scheme, host and port), besides loopback "
        "addresses, the presets' servers and --api-key-url's; again for more. Any other address is refused "
        "(403). It gets no key of the server's.",
        metavar="URL",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume", help="Resume runs a stopped server left unfinished (never one another process is writing)."
    ),
]
AllowLmsOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="A Canvas address (its scheme, host and port) the LMS pages and API may reach, besides loopback "
        "addresses; again for more. Any other is refused (403).",
        metavar="URL",
    ),
]


def serve_command(
    host: HostOpt = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    data_dir: DataDirOpt = None,
    token: TokenOpt = None,
    asap_dir: Annotated[Path | None, typer.Option(help="Folder with the shipped ASAP rubrics and data.")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Exemplar indexes and response cache.")] = None,
    model_path: Annotated[Path | None, typer.Option(help="A GGUF file for the embedded backend.")] = None,
    slots: Annotated[int, typer.Option(help="Embedded backend: parallel model contexts.")] = 2,
    runtime: RuntimeOpt = DEFAULT_RUNTIME,
    backend_concurrency: Annotated[
        int, typer.Option(help="Requests in flight to one backend, shared by every run on it.")
    ] = 8,
    api_key_env: KeyEnvOpt = None,
    api_key_url: KeyUrlOpt = None,
    allow_backend_url: AllowUrlOpt = None,
    allow_lms_url: AllowLmsOpt = None,
    embedder: Annotated[
        str,
        typer.Option(
            help="Exemplar pools' embedder: minilm (the MADRAG paper's), minilm-windows (whole essays), hashing "
            "(checks) or server (an OpenAI-compatible backend's /v1/embeddings)."
        ),
    ] = "minilm",
    resume: ResumeOpt = False,
    max_upload_mb: Annotated[float, typer.Option(help="Largest request body (upload), in MB.")] = 20.0,
    max_essays: Annotated[int, typer.Option(help="Most essays in one upload.")] = MAX_ROWS,
) -> None:
    """Serve the web app for teachers and the JSON API (OpenAPI at /docs) on the same pipeline and run store."""
    from madrag.server import Limits, ServerConfig
    from madrag.server.config import default_data_dir

    chosen_embedder, chosen_runtime = _check_choices(embedder=embedder, runtime=runtime, port=port)
    given, generated = _token(token, host)
    any_kind, per_kind = _key_envs(api_key_env or [])
    any_kind_urls, per_kind_urls = _key_urls(api_key_url or [])
    limits = Limits(max_upload_bytes=int(max_upload_mb * 1024 * 1024), max_rows=max_essays)
    config = ServerConfig(
        data_dir=data_dir or default_data_dir(),
        host=host,
        port=port,
        token=given,
        limits=limits,
        asap_dir=asap_dir,
        cache_dir=cache_dir,
        model_path=str(model_path) if model_path else None,
        slots=slots,
        runtime=chosen_runtime,
        backend_concurrency=backend_concurrency,
        api_key_env=any_kind,
        kind_key_envs=per_kind,
        api_key_urls=any_kind_urls,
        kind_key_urls=per_kind_urls,
        allow_backend_urls=tuple(_url("--allow-backend-url", u) for u in allow_backend_url or []),
        allow_lms_urls=tuple(_url("--allow-lms-url", u) for u in allow_lms_url or []),
        embedder=chosen_embedder,
        auto_resume=resume,
    )
    _run(config, generated)


def _check_choices(*, embedder: str, runtime: str, port: int) -> tuple[EmbedderName, LlamaRuntime]:
    """The options with a fixed set of values, checked (a one-line error names the option and its choices)."""
    if port < 1 or port > 65535:
        raise ConfigError(f"--port must be between 1 and 65535, got {port}")
    return choice("--embedder", embedder, EMBEDDERS), choice("--runtime", runtime, LLAMA_RUNTIMES)


def _key_envs(given: list[str]) -> tuple[str | None, dict[str, str]]:
    """``--api-key-env``'s values read: (the variable named alone, the variables named per kind); a ConfigError
    for a kind not registered or that takes no key, or a variable named twice for one."""
    found: dict[str, str] = {}  # "" for the one named alone
    for text in given:
        kind, sep, var = (part.strip() for part in text.rpartition("="))
        if not var or (sep and not kind):
            raise ConfigError(f"--api-key-env takes VAR or KIND=VAR; got {text!r}")
        if kind:
            _check_key_kind("--api-key-env", text, kind)
        if kind in found:
            raise ConfigError(f"--api-key-env names the {kind or 'OpenAI-compatible'} key's variable twice")
        found[kind] = var
    alone = found.pop("", None)
    return alone, found


def _check_key_kind(option: str, text: str, kind: str) -> None:
    """A ConfigError when ``kind`` (of ``option``'s value ``text``) is not registered or takes no API key."""
    from madrag.providers.backends import find_backend

    try:
        takes_key = find_backend(kind).traits.needs_key
    except ConfigError as exc:
        raise ConfigError(f"{option} {text}: {exc}") from None
    if not takes_key:
        raise ConfigError(f"{option} {text}: the {kind} backend takes no API key")


def _url(option: str, text: str) -> str:
    """A URL given to ``option``, checked (a ConfigError when it is not an http(s) address with a host)."""
    from madrag.server.access import origin
    from madrag.server.http.faults import BadInput

    try:
        origin(text)
    except BadInput:
        raise ConfigError(f"{option} takes an http:// or https:// URL with a host; got {text!r}") from None
    return text.strip()


def _key_urls(given: list[str]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """``--api-key-url``'s values read: (the URLs named alone, the URLs named per kind); a ConfigError for a kind
    not registered or that takes no key, or a value that is not a URL."""
    alone: list[str] = []
    per_kind: dict[str, tuple[str, ...]] = {}
    for text in given:
        kind, sep, url = text.partition("=") if not text.strip().startswith(("http://", "https://")) else ("", "", text)
        kind = kind.strip()
        if sep:
            _check_key_kind("--api-key-url", text, kind)
            per_kind[kind] = (*per_kind.get(kind, ()), _url("--api-key-url", url))
        else:
            alone.append(_url("--api-key-url", text))
    return tuple(alone), per_kind


def _token(token: str | None, host: str) -> tuple[str | None, bool]:
    """The server's token (``--token``, else ``$MADRAG_SERVER_TOKEN``, else one generated off loopback; None on
    loopback without one) and whether it was generated; a ConfigError for one too weak to guard ``host``
    (:func:`~madrag.server.config.token_problem`)."""
    from madrag.server.config import is_loopback, token_problem

    given = token if token is not None else os.environ.get(TOKEN_ENV) or None
    if problem := token_problem(given, host):
        raise ConfigError(f"--token: {problem}")
    generated = given is None and not is_loopback(host)
    if generated:
        given = secrets.token_urlsafe(24)
    return given, generated


def _run(config: ServerConfig, generated: bool) -> None:
    """Print where the app is (with a ``generated`` token, once, in its address) and serve it until stopped."""
    import uvicorn

    from madrag.server import create_app
    from madrag.server.app import data_dir_lock

    # held while it serves; a second server on the data directory is refused here, in one line
    with data_dir_lock(config) as lock:
        app = create_app(config, data_lock=lock)
        host, port = config.host, config.port
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{port}/"
        if generated:
            typer.echo(f"madrag serve: open {url}?token={config.token}  (this token is shown once; keep it)")
        else:
            typer.echo(f"madrag serve: open {url}" + ("  (token required)" if config.token_required else ""))
        typer.echo(f"runs are kept in {config.data_dir}")
        uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
