"""How the CLIs log: ``--log-format text`` (the default, for people) or ``json`` (one JSON
object a line, for machines: ``ts``, ``level``, ``logger``, ``message``, and ``peer`` /
``line`` when the event names them through ``extra=``)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from lifeline.wording import shown_text

__all__ = ["LOG_FORMATS", "JsonFormatter", "TextFormatter", "configure_logging"]

LOG_FORMATS = ("text", "json")
NAMED = ("peer", "line")  # fields an event may name through ``extra=``


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in NAMED:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = str(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``LEVEL logger: message``, for people: a peer's words or a line's text in a message
    are shown with their control characters escaped, as the CLIs print them (decision
    0128). A message's further lines are indented, so text a peer sent cannot start a line
    that reads as a record of its own; a traceback keeps its lines."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return super().formatMessage(record).replace("\n", "\n  ")

    def format(self, record: logging.LogRecord) -> str:
        return shown_text(super().format(record))


def configure_logging(*, verbose: bool, log_format: str) -> None:
    """Warnings and errors (everything with ``-v``) on stderr. In JSON, a node's events
    (``lifeline``/``lifeline_mesh`` loggers, level INFO) too: a machine reading the log
    wants each session, not only what went wrong."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, handlers=[handler])
    # -v is for our own modules: the event loop's and the libraries' debug chatter (selector
    # choice, every HTTP connection) says nothing about what this command did.
    for noisy in ("grpc", "hpack", "httpcore", "httpx", "aiosqlite", "asyncpg"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # asyncio's own warnings are about its internals racing (a worker process reaped by
    # another watcher: "Unknown child process pid N"), never about what the command did
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    if log_format == "json" and not verbose:
        for name in ("lifeline", "lifeline_mesh"):
            logging.getLogger(name).setLevel(logging.INFO)
