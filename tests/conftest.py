from __future__ import annotations

from pathlib import Path

import pytest

from server.config import Settings
from tests.helpers import make_runtime, settings_for
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
