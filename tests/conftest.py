from __future__ import annotations

import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.config import Settings
from tests.helpers import background_process, free_port, make_runtime, settings_for
from tools.common import Runtime


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return settings_for(tmp_path / "store")


@pytest.fixture
def runtime(settings: Settings) -> Runtime:
    built = make_runtime(settings)
    yield built
    built.close()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 1-layer BERT embedder and cross-encoder with a tokenizer trained on a few sentences."""
    from tests.tiny_models import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture
def s3_bucket() -> Iterator[tuple[str, dict[str, str]]]:
    """A local S3 server (moto) on a loopback port with an empty bucket: (the bucket's s3:// URL, the
    LanceDB storage options that reach it)."""
    pytest.importorskip("moto.server", reason="needs moto[server] (a test extra)")
    port = free_port()
    args = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with background_process(args, {}, port):
        endpoint = f"http://127.0.0.1:{port}"
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/memoria", method="PUT"), timeout=10)
        yield (
            "s3://memoria",
            {
                "aws_endpoint": endpoint,
                "aws_access_key_id": "test",
                "aws_secret_access_key": "test",
                "aws_region": "us-east-1",
                "allow_http": "true",
            },
        )
