"""Which environment variable a web run's backend reads its key from when none is typed in (ServerConfig.key_env):
the kind's own default unless ``madrag serve --api-key-env`` named one, ``KIND=VAR`` for one kind and ``VAR``
alone for the OpenAI-compatible backend, as the option always meant."""

from __future__ import annotations

import pytest

from madrag.cli.serve import _key_envs
from madrag.errors import ConfigError
from madrag.server import ServerConfig


def test_each_kind_reads_its_own_variable_unless_one_is_named() -> None:
    plain = ServerConfig()
    assert plain.key_env("openai") == "OPENAI_API_KEY" and plain.key_env("anthropic") == "ANTHROPIC_API_KEY"
    assert plain.key_env("fake") is None and plain.key_env("llamacpp") is None  # they read no key
    alone = ServerConfig(api_key_env="TEAM_OPENAI_KEY")
    assert alone.key_env("openai") == "TEAM_OPENAI_KEY"
    assert alone.key_env("anthropic") == "ANTHROPIC_API_KEY"  # the OpenAI key's variable is never Anthropic's
    named = ServerConfig(api_key_env="TEAM_OPENAI_KEY", kind_key_envs={"anthropic": "TEAM_ANTHROPIC_KEY"})
    assert named.key_env("anthropic") == "TEAM_ANTHROPIC_KEY" and named.key_env("openai") == "TEAM_OPENAI_KEY"
    with pytest.raises(ConfigError, match="unknown provider 'nope'"):
        plain.key_env("nope")


def test_serves_option_reads_var_and_kind_var() -> None:
    assert _key_envs([]) == (None, {})
    assert _key_envs(["MY_KEY"]) == ("MY_KEY", {})
    assert _key_envs(["anthropic=TEAM_KEY", "MY_KEY"]) == ("MY_KEY", {"anthropic": "TEAM_KEY"})
    assert _key_envs(["openai=A"]) == (None, {"openai": "A"})
    for bad, says in [
        ("fake=X", "the fake backend takes no API key"),
        ("nope=X", "unknown provider 'nope'"),
        ("anthropic=", "takes VAR or KIND=VAR"),
        ("=X", "takes VAR or KIND=VAR"),
    ]:
        with pytest.raises(ConfigError, match=says):
            _key_envs([bad])
    with pytest.raises(ConfigError, match="twice"):
        _key_envs(["anthropic=A", "anthropic=B"])
