"""Which model servers the web server may reach and where its own keys go (madrag.server.access), and the
``madrag serve`` options that set them; the strength of a public server's token. No request is sent: names are
resolved by a resolver the tests give."""

from __future__ import annotations

import pytest

from madrag.cli.serve import _key_urls, _token
from madrag.errors import ConfigError
from madrag.server import ServerConfig
from madrag.server.access import check_address, env_key, key_goes_to, normal_url
from madrag.server.config import token_problem
from madrag.server.http.faults import BadInput, NotAllowed


def nowhere(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} should not have been resolved")


def test_a_url_is_compared_by_scheme_host_port_and_path() -> None:
    assert normal_url("https://API.openai.com/v1/") == normal_url("https://api.openai.com:443/v1")
    assert normal_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"
    assert normal_url("http://u:p@host/v1?x=1") == "http://host:80/v1"
    with pytest.raises(BadInput, match="with a host"):
        normal_url("ftp://host/v1")


def test_the_servers_key_goes_to_its_kinds_own_server_and_the_urls_bound_to_it() -> None:
    plain = ServerConfig()
    assert key_goes_to(plain, "openai", None) and key_goes_to(plain, "openai", "https://api.openai.com/v1/")
    assert key_goes_to(plain, "anthropic", "https://api.anthropic.com")
    assert not key_goes_to(plain, "openai", "http://127.0.0.1:8000/v1")  # loopback: reachable, but no key
    assert not key_goes_to(plain, "openai", "https://api.openai.com.evil.example/v1")
    assert not key_goes_to(plain, "anthropic", "https://api.openai.com/v1")  # the other kind's server
    assert env_key(plain, "openai", "http://127.0.0.1:8000/v1") == ""  # no variable is read
    assert env_key(plain, "openai", None) == "OPENAI_API_KEY" and env_key(plain, "fake", None) is None
    bound = ServerConfig(
        api_key_env="TEAM", api_key_urls=("http://gpu.lan:8000/v1",), kind_key_urls={"anthropic": ("http://p/",)}
    )
    assert env_key(bound, "openai", "http://GPU.lan:8000/v1/") == "TEAM"
    assert env_key(bound, "openai", "http://gpu.lan:8000/other") == ""  # another path: not the URL bound
    assert env_key(bound, "anthropic", "http://p") == "ANTHROPIC_API_KEY"
    assert env_key(bound, "anthropic", "http://gpu.lan:8000/v1") == ""  # bound to the OpenAI-compatible kind


def test_addresses_loopback_presets_and_the_operators_are_allowed_without_a_connection() -> None:
    plain = ServerConfig()
    for url in [
        None,
        "http://127.0.0.1:9/v1",
        "http://127.1.2.3/v1",
        "http://[::1]:8000/v1",
        "http://localhost:11434/v1",  # a preset
        "https://api.openai.com/v1",  # a preset and the openai kind's own
        "https://api.anthropic.com",
    ]:
        check_address(plain, url, nowhere)
    operator = ServerConfig(allow_backend_urls=("http://10.0.0.5:8000",), api_key_urls=("https://gw.example/v1",))
    check_address(operator, "http://10.0.0.5:8000/v1", nowhere)
    check_address(operator, "https://gw.example/other", nowhere)
    with pytest.raises(NotAllowed, match=r"10\.0\.0\.5:8001"):
        check_address(operator, "http://10.0.0.5:8001/v1", nowhere)  # another port of that host


@pytest.mark.parametrize(
    ("url", "answers", "says"),
    [
        ("http://10.0.0.1/v1", None, "10.0.0.1 is 10.0.0.1, not a loopback address"),
        ("http://0.0.0.0:8000/v1", None, "not a loopback address"),
        ("http://[::ffff:10.0.0.1]/v1", None, "not a loopback address"),
        ("http://meta.test/", ["169.254.169.254"], "meta.test is 169.254.169.254"),
        ("http://half.test/", ["127.0.0.1", "192.168.1.4"], "192.168.1.4"),
        ("http://gone.test/", [], "resolves to no address"),
    ],
)
def test_other_addresses_are_refused_naming_the_option(url: str, answers: list[str] | None, says: str) -> None:
    resolver = nowhere if answers is None else (lambda host, port: answers)
    with pytest.raises(NotAllowed, match="--allow-backend-url") as refused:
        check_address(ServerConfig(), url, resolver)
    assert says in refused.value.message and refused.value.field == "base_url"


def test_a_name_resolving_only_to_loopback_is_allowed() -> None:
    check_address(ServerConfig(), "http://box.test:8080/v1", lambda host, port: ["127.0.1.1", "::1"])
    check_address(ServerConfig(), "http://[::ffff:127.0.0.1]:8080/v1", nowhere)


def test_serves_api_key_url_option() -> None:
    assert _key_urls([]) == ((), {})
    assert _key_urls(["http://gpu:8000/v1", "anthropic=https://proxy.lan"]) == (
        ("http://gpu:8000/v1",),
        {"anthropic": ("https://proxy.lan",)},
    )
    assert _key_urls(["http://gpu:8000/v1?a=b"]) == (("http://gpu:8000/v1?a=b",), {})  # an = in the URL
    for bad, says in [
        ("fake=http://x", "the fake backend takes no API key"),
        ("nope=http://x", "unknown provider 'nope'"),
        ("gpu:8000", "takes an http:// or https:// URL"),
        ("openai=x", "takes an http:// or https:// URL"),
    ]:
        with pytest.raises(ConfigError, match=says):
            _key_urls([bad])
    with pytest.raises(ValueError, match="not an http"):
        ServerConfig(allow_backend_urls=("10.0.0.1:8000",))


def test_a_public_servers_token_has_a_minimum_strength(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADRAG_SERVER_TOKEN", raising=False)
    for weak in ["x", " ", "", "short-token", "sixteen chars ok"]:
        with pytest.raises(ConfigError, match="--token: "):
            _token(weak, "0.0.0.0")
        with pytest.raises(ValueError, match="token"):
            ServerConfig(host="0.0.0.0", token=weak)
    assert "at least 16 characters" in (token_problem("x", "0.0.0.0") or "")
    assert _token("a-token-of-24-characters", "0.0.0.0") == ("a-token-of-24-characters", False)
    assert _token("x", "127.0.0.1") == ("x", False)  # loopback: any token given, but not a blank one
    with pytest.raises(ConfigError, match="blank"):
        _token(" ", "127.0.0.1")
    generated, was = _token(None, "0.0.0.0")
    assert was and generated is not None and token_problem(generated, "0.0.0.0") is None
    monkeypatch.setenv("MADRAG_SERVER_TOKEN", "weak")
    with pytest.raises(ConfigError, match="at least 16"):
        _token(None, "::")


def test_the_http_clients_guard_allows_loopback_and_the_names_the_operator_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from madrag.server.access import connect_problem

    operator = ServerConfig(allow_backend_urls=("http://gpu.lan:8000",))
    assert connect_problem(operator, "gpu.lan", 8000, ["10.0.0.7"]) is None  # named by the operator
    assert connect_problem(operator, "api.openai.com", 443, ["104.18.0.1"]) is None  # the openai kind's own
    assert connect_problem(operator, "localhost", 11434, ["127.0.0.1", "::1"]) is None
    refused = connect_problem(operator, "gpu.lan", 8001, ["10.0.0.7"])
    assert refused == "gpu.lan resolved to 10.0.0.7 when connecting: not allowed (madrag serve --allow-backend-url)"
    assert "no address" in (connect_problem(operator, "x.test", 80, []) or "")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gateway.corp:9000/v1")  # the openai kind's own, set so
    assert connect_problem(operator, "gateway.corp", 9000, ["10.1.1.1"]) is None
