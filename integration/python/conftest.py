"""Fixtures of the Python SDK suite.

The suite runs against a Vajra server serving the real model, which the Go
test TestPythonSDKs (integration/python_test.go) starts and describes in
the environment: VAJRA_BASE_URL (http://127.0.0.1:PORT), VAJRA_API_KEY,
VAJRA_MODEL and VAJRA_MAX_CONCURRENT (its --max-concurrent-requests, with
no queue). Run alone against a server started by hand the same way:

    VAJRA_BASE_URL=http://127.0.0.1:8000 VAJRA_API_KEY=k VAJRA_MODEL=m \\
    VAJRA_MAX_CONCURRENT=3 .venv/bin/python -m pytest integration/python
"""

import os

import anthropic
import openai
import pytest


def _env(name):
    v = os.environ.get(name)
    if not v:
        pytest.exit(f"{name} is not set: run the suite through the Go test TestPythonSDKs", returncode=2)
    return v


@pytest.fixture(scope="session")
def base_url():
    return _env("VAJRA_BASE_URL")


@pytest.fixture(scope="session")
def api_key():
    return _env("VAJRA_API_KEY")


@pytest.fixture(scope="session")
def model():
    return _env("VAJRA_MODEL")


@pytest.fixture(scope="session")
def max_concurrent():
    return int(_env("VAJRA_MAX_CONCURRENT"))


@pytest.fixture(scope="session")
def oai(base_url, api_key):
    return openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0, timeout=60)


@pytest.fixture(scope="session")
def ant(base_url, api_key):
    return anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
