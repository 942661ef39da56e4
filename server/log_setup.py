"""Logging to stderr only (on a stdio server, stdout carries the protocol and nothing else), with secrets
replaced in every record."""

from __future__ import annotations

import logging
import sys

from retrieval.redaction import RedactingFilter


def configure_logging(level: str = "INFO") -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())  # no secret reaches the log, whoever logged it
    root.addHandler(handler)
    root.setLevel(level)
    # Libraries that chatter at INFO about every request.
    for noisy in ("httpx", "httpcore", "sentence_transformers", "transformers", "huggingface_hub", "mcp"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
