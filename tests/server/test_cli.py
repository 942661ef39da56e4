import argparse
import subprocess
import sys

import pytest

from server.cli import parse_http_address


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8765", ("127.0.0.1", 8765)),
        ("0.0.0.0:9000", ("0.0.0.0", 9000)),
        ("[::1]:8080", ("::1", 8080)),
        (":7000", ("127.0.0.1", 7000)),
    ],
)
def test_http_address_defaults_to_loopback(text, expected):
    assert parse_http_address(text) == expected


@pytest.mark.parametrize("text", ["localhost", "1.2.3.4:99999", "host:port"])
def test_bad_http_addresses_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_http_address(text)


def test_a_bad_environment_variable_stops_start_up_with_its_name():
    result = subprocess.run(
        [sys.executable, "-m", "server", "serve"],
        env={"MEMORIA_RERANK_MULTIPLIER": "lots", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "MEMORIA_RERANK_MULTIPLIER" in result.stderr
    assert result.stdout == ""
