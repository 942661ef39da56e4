import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from server.config import RENAMED, ConfigError, Settings, default_data_dir, variables

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_follow_the_seeds_and_the_issue():
    settings = Settings.from_env({}, db_uri="/tmp/x")
    assert (settings.embedding.model, settings.rerank.model) == (
        "sentence-transformers/all-MiniLM-L6-v2",
        "cross-encoder/ms-marco-MiniLM-L6-v2",
    )
    assert (settings.rerank.multiplier, settings.vector.dim, settings.org_id, settings.project_id) == (
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
    assert settings.db_uri == "s3://bucket/memories"
    assert settings.storage_options == {"region": "eu-west-1"}
    assert settings.cohere.api_key.get_secret_value() == "cohere-key-value"
    assert "cohere-key-value" not in repr(settings)
    assert settings.allow_model_downloads is False
    assert settings.feedback_weighting_enabled("acme") is False
    assert settings.feedback_weighting_enabled("other") is True


@pytest.mark.parametrize(
    "environ, message",
    [
        ({"MEMORIA_RERANKER": "magic"}, "MEMORIA_RERANKER"),
        (
            {"MEMORIA_STORAGE_OPTIONS": "{not json"},
            "MEMORIA_STORAGE_OPTIONS: must be JSON, but it does not parse",
        ),
        ({"MEMORIA_STORAGE_OPTIONS": "[1]"}, "MEMORIA_STORAGE_OPTIONS: must be a JSON object, but got list"),
        (
            {"MEMORIA_ALLOW_MODEL_DOWNLOADS": "maybe"},
            "MEMORIA_ALLOW_MODEL_DOWNLOADS: must be true or false, but got 'maybe'",
        ),
        # glibc (before 2.35) takes an mmap threshold of at most 32 MB on 64-bit machines
        ({"MEMORIA_MALLOC_MMAP_THRESHOLD_KB": "32769"}, "MEMORIA_MALLOC_MMAP_THRESHOLD_KB"),
        (
            {"MEMORIA_FEEDBACK_MIN_WEIGHT": "2", "MEMORIA_FEEDBACK_MAX_WEIGHT": "1"},
            "MEMORIA_FEEDBACK_MAX_WEIGHT: must be greater than MEMORIA_FEEDBACK_MIN_WEIGHT",
        ),
        ({"MEMORIA_CACHE_SCOPE_ROWS": "-1"}, "MEMORIA_CACHE_SCOPE_ROWS: "),
        (
            {"MEMORIA_FEEDBACK_CLOSENESS": "[0.9, 0.1]"},
            "MEMORIA_FEEDBACK_CLOSENESS: must be \\[start, full\\]",
        ),
        ({"MEMORIA_HTTP_ALLOWED_HOSTS": '["a.example:*"'}, "MEMORIA_HTTP_ALLOWED_HOSTS: must be JSON"),
        ({"MEMORIA_ORG_ID": "acme/web"}, "MEMORIA_ORG_ID: must not contain '/'"),
        ({"MEMORIA_PROJECT_ID": "*"}, "MEMORIA_PROJECT_ID: '\\*' stands for every project"),
        ({"MEMORIA_ORG_FEATURES": '{"acme": {"colour": 1}}'}, r"MEMORIA_ORG_FEATURES \(at acme.colour\)"),
        # a misspelt variable of a group is refused rather than ignored
        ({"MEMORIA_CACHE_SCOPE_ROW": "5"}, "MEMORIA_CACHE_SCOPE_ROW: no such setting"),
        # with the setting it most likely meant, when one is close
        (
            {"MEMORIA_FEEDBACK_ALPHA": "0.3"},
            r"MEMORIA_FEEDBACK_ALPHA: no such setting \(did you mean MEMORIA_FEEDBACK_EMA_ALPHA\?\)",
        ),
        (
            {"MEMORIA_FEEDBACK_ZZZ": "1"},
            r"MEMORIA_FEEDBACK_ZZZ: no such setting \(docs/configuration.md lists",
        ),
    ],
)
def test_bad_values_name_the_variable(environ, message):
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(environ, db_uri="/tmp/x")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ('"/tmp/trial/store"', r"MEMORIA_DB_URI: is quoted \(\"/tmp/trial/store\"\): remove the quotes"),
        ("'/tmp/trial/store'", "MEMORIA_DB_URI: is quoted"),
    ],
)
def test_a_quoted_store_uri_is_refused_rather_than_made_a_folder_named_by_its_quote(uri, message):
    # A new user's trial: quotes copied in from a .env file made a folder named '"' under the working folder.
    with pytest.raises(ConfigError, match=message):
        Settings.from_env({"MEMORIA_DB_URI": uri})


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


def test_mcp_json_sets_only_a_few_variables_the_server_reads():
    entry = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]["memoria"]
    assert entry["command"] == "memoria" and entry["args"] == ["serve"]
    assert 0 < len(entry["env"]) <= 5
    assert set(entry["env"]) <= set(variables())


def test_the_configuration_docs_list_every_variable_the_settings_read():
    documented = (ROOT / "docs" / "configuration.md").read_text()
    found = variables()
    assert "MEMORIA_CACHE_SCOPE_ROWS" in found and "COHERE_API_KEY" in found and len(found) > 100
    assert [variable for variable in found if f"`{variable}`" not in documented] == []
    assert [old for old in RENAMED if f"`{old}`" not in documented] == []


def test_nested_variables_set_the_fields_of_their_groups():
    settings = Settings.from_env(
        {
            "MEMORIA_DB_URI": "/tmp/y",
            "MEMORIA_CACHE_SCOPE_ROWS": "12",
            "MEMORIA_MALLOC_MMAP_THRESHOLD_KB": " 128 ",
            "MEMORIA_CONSOLIDATION_ACROSS_AGENTS": "yes",
            "MEMORIA_CONSOLIDATION_RERANK_MIN_SCORE": "0.25",
            "MEMORIA_FEEDBACK_CLOSENESS": "[0.2, 0.4]",
            "MEMORIA_HTTP_ALLOWED_ORIGINS": "https://a.example, https://b.example",
            "MEMORIA_OAUTH_CLIENT_SECRET": "s3cret",
            "MEMORIA_EMBEDDING_MODEL_FILE": "onnx/model_qint8_avx2.onnx",
            "MEMORIA_RERANK_MULTIPLIER": "5",
            "MEMORIA_MODEL_BACKEND": "torch",
            "MEMORIA_VECTOR_DIM": "64",
            # a JSON object setting whose name starts another's is not read as a group
            "MEMORIA_LLM_RERANKER_BY_AGENT": '{"ada": {"enabled": true}}',
        }
    )
    assert (settings.cache.scope_rows, settings.cache.total_rows) == (12, 400_000)
    assert settings.malloc.mmap_threshold_kb == 128 and settings.malloc.arenas == 2
    assert settings.consolidation.across_agents is True and settings.consolidation.rerank_min_score == 0.25
    assert settings.consolidation.enabled is True
    assert settings.feedback.closeness == (0.2, 0.4)
    assert settings.http.allowed_origins == ["https://a.example", "https://b.example"]
    assert settings.oauth.client_secret is not None
    assert settings.oauth.client_secret.get_secret_value() == "s3cret" and "s3cret" not in repr(settings)
    assert settings.embedding.model_file == "onnx/model_qint8_avx2.onnx"
    assert (settings.rerank.multiplier, settings.model.backend, settings.vector.dim) == (5, "torch", 64)
    assert settings.llm_reranker == {} and settings.llm_reranker_by_agent == {"ada": {"enabled": True}}


def test_overrides_are_named_like_their_variables_and_win():
    settings = Settings.from_env(
        {"MEMORIA_CACHE_SCOPE_ROWS": "12", "MEMORIA_CACHE_TOTAL_ROWS": "30"},
        db_uri="/tmp/y",
        cache_scope_rows=0,
        feedback_min_weight=0.5,
    )
    assert (settings.cache.scope_rows, settings.cache.total_rows, settings.feedback.min_weight) == (
        0,
        30,
        0.5,
    )
    again = settings.replace(cache_total_rows=7, max_tags=3)
    assert (again.cache.scope_rows, again.cache.total_rows, again.max_tags) == (0, 7, 3)
    with pytest.raises(ConfigError, match="MEMORIA_FEEDBACK_MAX_WEIGHT"):
        settings.replace(feedback_max_weight=0.4)
    with pytest.raises(TypeError, match="cache_scope_row"):
        Settings.from_env({}, db_uri="/tmp/y", cache_scope_row=1)


def test_a_group_given_whole_and_its_fields_named_one_by_one_combine_in_any_order():
    group = {"scope_rows": 5, "total_rows": 9}
    first = Settings.from_env({}, db_uri="/tmp/y", cache=group, cache_total_rows=2)
    second = Settings.from_env({}, db_uri="/tmp/y", cache_total_rows=2, cache=group)
    assert (first.cache.scope_rows, first.cache.total_rows) == (5, 2)
    assert (second.cache.scope_rows, second.cache.total_rows) == (5, 2)
    assert group == {"scope_rows": 5, "total_rows": 9}  # the caller's dict is left as it was


def test_the_settings_read_only_the_variables_they_are_given(monkeypatch):
    # The process environment reaches the settings only through from_env() without a mapping.
    monkeypatch.setenv("MEMORIA_ORG_ID", "leak")
    monkeypatch.setenv("MEMORIA_CACHE_SCOPE_ROWS", "3")
    given = Settings.from_env({}, db_uri="/tmp/y")
    assert (given.org_id, given.cache.scope_rows) == ("default", 250_000)
    assert (
        Settings.from_env(db_uri="/tmp/y").org_id,
        Settings.from_env(db_uri="/tmp/y").cache.scope_rows,
    ) == (
        "leak",
        3,
    )


def test_the_cohere_key_is_read_from_its_standard_variable_unless_memorias_own_is_set():
    standard = Settings.from_env({"COHERE_API_KEY": "k1"}, db_uri="/tmp/y")
    assert standard.cohere.api_key is not None and standard.cohere.api_key.get_secret_value() == "k1"
    both = Settings.from_env({"COHERE_API_KEY": "k1", "MEMORIA_COHERE_API_KEY": "k2"}, db_uri="/tmp/y")
    assert both.cohere.api_key is not None and both.cohere.api_key.get_secret_value() == "k2"
    assert Settings.from_env({}, db_uri="/tmp/y").cohere.api_key is None


def test_settings_are_frozen():
    settings = Settings.from_env({}, db_uri="/tmp/y")
    with pytest.raises(ValidationError):
        settings.cache.scope_rows = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.org_id = "other"  # type: ignore[misc]


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


@pytest.mark.parametrize(
    "old, new",
    [
        ("MEMORIA_KEEP_VERSIONS_MINUTES", "MEMORIA_KEEP_VERSIONS_SECONDS"),
        ("MEMORIA_ENABLE_CONSOLIDATION", "MEMORIA_CONSOLIDATION_ENABLED"),
        ("MEMORIA_CONSOLIDATE_ACROSS_AGENTS", "MEMORIA_CONSOLIDATION_ACROSS_AGENTS"),
        ("MEMORIA_ENABLE_ARTIFACT_CONSOLIDATION", "MEMORIA_CONSOLIDATION_ARTIFACTS"),
        ("MEMORIA_ARTIFACT_CONSOLIDATION_CONFIDENCE_THRESHOLD", "MEMORIA_CONSOLIDATION_ARTIFACT_THRESHOLD"),
    ],
)
def test_a_renamed_variable_stops_the_server_with_its_new_name(old, new):
    with pytest.raises(ConfigError, match=f"{old} is now {new} .*Set the new variable instead"):
        Settings.from_env({old: "1"})
    assert new in variables()


def test_the_new_names_of_renamed_variables_are_read():
    settings = Settings.from_env(
        {
            "MEMORIA_KEEP_VERSIONS_SECONDS": "12",
            "MEMORIA_CONSOLIDATION_ENABLED": "off",
            "MEMORIA_CONSOLIDATION_ARTIFACTS": "0",
            "MEMORIA_CONSOLIDATION_ARTIFACT_THRESHOLD": "0.75",
        }
    )
    assert settings.keep_versions_seconds == 12.0
    assert (settings.consolidation.enabled, settings.consolidation.artifacts) == (False, False)
    assert settings.consolidation.artifact_threshold == 0.75


def test_the_llm_passes_are_named_in_a_list_and_an_unknown_one_is_refused():
    assert Settings.from_env({}, db_uri="/tmp/x").llm_passes == []
    named = Settings.from_env({"MEMORIA_LLM_PASSES": "context_selection, cleanup"}, db_uri="/tmp/x")
    assert named.llm_passes == ["context_selection", "cleanup"]
    as_json = Settings.from_env({"MEMORIA_LLM_PASSES": '["fact_selection"]'}, db_uri="/tmp/x")
    assert as_json.llm_passes == ["fact_selection"]
    with pytest.raises(ConfigError, match="MEMORIA_LLM_PASSES: unknown pass 'summarise': the passes are"):
        Settings.from_env({"MEMORIA_LLM_PASSES": "cleanup, summarise"}, db_uri="/tmp/x")


def test_a_memoria_variable_that_is_no_setting_is_said_once_with_the_closest_setting(caplog, monkeypatch):
    import server.config as config

    monkeypatch.setattr(config, "_warned", set())
    with caplog.at_level("WARNING", logger="server.config"):
        settings = Settings.from_env({"MEMORIA_TOP_K_FACT": "5", "MEMORIA_NOTHING_LIKE_IT": "1"})
        Settings.from_env({"MEMORIA_TOP_K_FACT": "5"})  # said once per process
    assert settings.top_k_facts == 10  # ignored: the default stands
    assert [record.getMessage() for record in caplog.records] == [
        "MEMORIA_NOTHING_LIKE_IT is not a memoria setting and is ignored (docs/configuration.md lists the settings)",
        "MEMORIA_TOP_K_FACT is not a memoria setting and is ignored (did you mean MEMORIA_TOP_K_FACTS?)",
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="server.config"):
        Settings.from_env(
            {"MEMORIA_TOP_K_FACTS": "5", "MEMORIA_FEEDBACK_EMA_ALPHA": "0.2", "COHERE_API_KEY": "k"}
        )
    assert caplog.records == []  # settings, a group's field and an alias are not warned about
