from retrieval.text import content_hash, content_terms, light_stem, normalize_content, word_tokens


def test_same_content_modulo_whitespace_hashes_the_same():
    assert content_hash("We use  Postgres\n") == content_hash("We use Postgres")
    assert content_hash("We use Postgres") != content_hash("We use postgres")


def test_normalisation_is_nfc_and_collapses_whitespace():
    assert normalize_content("  cafe\u0301 \t bar ") == "caf\u00e9 bar"


def test_word_tokens_fold_width_and_case_and_drop_punctuation():
    assert word_tokens("Ｐｏｓｔｇｒｅｓ, MySQL's v8.0!") == ["postgres", "mysql", "s", "v8", "0"]


def test_light_stem_handles_plurals_and_verb_endings_conservatively():
    words = [
        "databases",
        "queries",
        "classes",
        "running",
        "stopped",
        "deployed",
        "status",
        "bus",
        "sat",
        "falling",
    ]
    assert [light_stem(w) for w in words] == [
        "database",
        "query",
        "class",
        "run",
        "stop",
        "deploy",
        "status",
        "bus",
        "sat",
        "fall",
    ]


def test_content_terms_drop_stop_words_unless_nothing_else_is_left():
    assert content_terms("What is the deploy script?") == ["deploy", "script"]
    assert content_terms("what is it") == ["what", "is", "it"]
