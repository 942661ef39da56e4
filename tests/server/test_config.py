import json
from pathlib import Path

import pytest

from server.config import ENVIRONMENT, ConfigError, Settings, default_data_dir

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_follow_the_seeds_and_the_issue():
    settings = Settings.from_env({}, db_uri="/tmp/x")
    assert (settings.embedding_model, settings.rerank_model) == (
        "sentence-transformers/all-MiniLM-L6-v2",
        "cross-encoder/ms-marco-MiniLM-L6-v2",
    )
    assert (settings.rerank_multiplier, settings.vector_dim, settings.org_id, settings.project_id) == (
        3,
        384,
        "default",
        "default",
    )


def test_values_come_from_memoria_variables():
    settings = Settings.from_env(
        {
            "MEMORIA_DB_URI": "s3://bucket/memories",
            "MEMORIA_STORAGE_OPTIONS": '{"region": "eu-west-1"}',
            "MEMORIA_RERANKER": "cohere",
            "COHERE_API_KEY": "cohere-key-value",
            "MEMORIA_ALLOW_MODEL_DOWNLOADS": "no",
            "MEMORIA_ORG_FEATURES": '{"acme": {"feedback_weighting_disabled": true}}',
        }
    )
    assert settings.db_uri == "s3://bucket/memories" and not settings.is_local_store
    assert settings.storage_options == {"region": "eu-west-1"}
    assert settings.cohere_api_key.get_secret_value() == "cohere-key-value"
    assert "cohere-key-value" not in repr(settings)
    assert settings.allow_model_downloads is False
    assert settings.feedback_weighting_enabled("acme") is False
    assert settings.feedback_weighting_enabled("other") is True


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"MEMORIA_RERANKER": "magic"}, "MEMORIA_RERANKER"),
        ({"MEMORIA_STORAGE_OPTIONS": "{not json"}, "MEMORIA_STORAGE_OPTIONS must be JSON"),
        ({"MEMORIA_STORAGE_OPTIONS": "[1]"}, "MEMORIA_STORAGE_OPTIONS must be a JSON object"),
        ({"MEMORIA_ALLOW_MODEL_DOWNLOADS": "maybe"}, "MEMORIA_ALLOW_MODEL_DOWNLOADS must be true or false"),
        # glibc (before 2.35) takes an mmap threshold of at most 32 MB on 64-bit machines
        ({"MEMORIA_MALLOC_MMAP_THRESHOLD_KB": "32769"}, "MEMORIA_MALLOC_MMAP_THRESHOLD_KB"),
        (
            {"MEMORIA_FEEDBACK_MIN_WEIGHT": "2", "MEMORIA_FEEDBACK_MAX_WEIGHT": "1"},
            "MEMORIA_FEEDBACK_MAX_WEIGHT",
        ),
    ],
)
def test_bad_values_name_the_variable(environ, message):
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(environ, db_uri="/tmp/x")


def test_empty_variables_mean_the_default():
    assert Settings.from_env({"MEMORIA_ORG_ID": "", "MEMORIA_DB_URI": "/tmp/y"}).org_id == "default"


def test_the_default_store_lives_in_the_per_user_data_folder():
    home = Path("/home/ada")
    assert default_data_dir(home, "linux", {}) == home / ".local/share/memoria"
    assert default_data_dir(home, "linux", {"XDG_DATA_HOME": "/data"}) == Path("/data/memoria")
    assert default_data_dir(home, "darwin", {}) == home / "Library/Application Support/memoria"
    assert default_data_dir(home, "win32", {"LOCALAPPDATA": "C:/Users/ada/AppData/Local"}) == Path(
        "C:/Users/ada/AppData/Local/memoria"
    )
    assert Settings.from_env({"XDG_DATA_HOME": "/data"}).db_uri == "/data/memoria/lancedb"


def test_mcp_json_lists_every_variable_the_server_reads():
    entry = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]["memoria"]
    assert entry["command"] == "memoria" and entry["args"] == ["serve"]
    assert set(entry["env"]) == set(ENVIRONMENT.values())
    assert set(ENVIRONMENT) == set(Settings.model_fields)


def test_an_openai_compatible_endpoint_needs_its_url_and_model():
    with pytest.raises(ConfigError, match="MEMORIA_LLM=openai needs MEMORIA_OPENAI_BASE_URL"):
        Settings.from_env({"MEMORIA_LLM": "openai", "MEMORIA_DB_URI": "/tmp/y"})
    with pytest.raises(ConfigError, match="MEMORIA_OPENAI_BASE_URL needs MEMORIA_OPENAI_MODEL"):
        Settings.from_env(
            {"MEMORIA_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "MEMORIA_DB_URI": "/tmp/y"}
        )
    with pytest.raises(ConfigError, match=r"MEMORIA_OPENAI_BASE_URL: .*must be an http"):
        Settings.from_env(
            {
                "MEMORIA_OPENAI_BASE_URL": "localhost:11434",
                "MEMORIA_OPENAI_MODEL": "m",
                "MEMORIA_DB_URI": "/tmp/y",
            }
        )


def test_with_auto_the_background_llm_is_the_openai_compatible_endpoint_before_cohere():
    from server.llm_bridge import LLMChooser

    both = {
        "MEMORIA_DB_URI": "/tmp/y",
        "COHERE_API_KEY": "k",
        "MEMORIA_OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
    }
    chosen = LLMChooser(Settings.from_env({**both, "MEMORIA_OPENAI_MODEL": "llama3.2"})).background()
    assert chosen is not None and chosen.name == "openai-chat:llama3.2"
    cohere_only = LLMChooser(
        Settings.from_env({"MEMORIA_DB_URI": "/tmp/y", "COHERE_API_KEY": "k"})
    ).background()
    assert cohere_only is not None and cohere_only.name.startswith("cohere-chat:")
    told = Settings.from_env({**both, "MEMORIA_OPENAI_MODEL": "m", "MEMORIA_LLM": "cohere"})
    assert LLMChooser(told).background().name.startswith("cohere-chat:")


def test_a_renamed_variable_stops_the_server_with_its_new_name():
    with pytest.raises(
        ConfigError, match="MEMORIA_KEEP_VERSIONS_MINUTES is now MEMORIA_KEEP_VERSIONS_SECONDS"
    ):
        Settings.from_env({"MEMORIA_KEEP_VERSIONS_MINUTES": "1"})
    assert Settings.from_env({"MEMORIA_KEEP_VERSIONS_SECONDS": "12"}).keep_versions_seconds == 12.0


def test_the_llm_passes_are_named_in_a_list_and_an_unknown_one_is_refused():
    assert Settings.from_env({}, db_uri="/tmp/x").llm_passes == []
    named = Settings.from_env({"MEMORIA_LLM_PASSES": "context_selection, cleanup"}, db_uri="/tmp/x")
    assert named.llm_passes == ["context_selection", "cleanup"]
    as_json = Settings.from_env({"MEMORIA_LLM_PASSES": '["fact_selection"]'}, db_uri="/tmp/x")
    assert as_json.llm_passes == ["fact_selection"]
    with pytest.raises(ConfigError, match="MEMORIA_LLM_PASSES: unknown pass 'summarise': the passes are"):
        Settings.from_env({"MEMORIA_LLM_PASSES": "cleanup, summarise"}, db_uri="/tmp/x")
