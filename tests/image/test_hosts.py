"""RegistryHosts: containerd's hosts.toml semantics (order, server, defaults, dir names, TLS keys)
and the refusals at load (bad TOML, unknown key or capability, missing CA, bad cert)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from image.certs import Pki, make_pki
from podkit.image import HostsConfigError, RegistryHost, RegistryHosts
from podkit.image.hosts import default_server, host_dir_names, is_loopback, parse_hosts_toml


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _write(root: Path, registry: str, text: str) -> Path:
    d = root / registry
    d.mkdir(parents=True, exist_ok=True)
    (d / "hosts.toml").write_text(text)
    return d


def _urls(hosts: tuple[RegistryHost, ...]) -> list[str]:
    return [h.url for h in hosts]


def test_defaults_without_a_file(tmp_path: Path) -> None:
    hosts = RegistryHosts.load(tmp_path / "missing")
    assert _urls(hosts.hosts("docker.io")) == ["https://registry-1.docker.io/v2"]
    assert _urls(hosts.hosts("gcr.io")) == ["https://gcr.io/v2"]
    assert _urls(hosts.hosts("127.0.0.1:5000")) == ["http://127.0.0.1:5000/v2"]
    assert _urls(hosts.hosts("localhost:5000")) == ["http://localhost:5000/v2"]
    assert _urls(RegistryHosts(scheme="https").hosts("127.0.0.1:5000")) == \
        ["https://127.0.0.1:5000/v2"]
    assert hosts.hosts("quay.io")[0].capabilities == {"pull", "resolve", "push"}
    assert default_server("docker.io").host == "registry-1.docker.io"
    assert is_loopback("[::1]:5000") and is_loopback("127.0.0.2") and not is_loopback("gcr.io")


def test_hosts_in_file_order_then_server(tmp_path: Path) -> None:
    _write(tmp_path, "docker.io", '''
server = "https://registry-1.docker.io"
[host."https://zzz.example"]
  capabilities = ["pull", "resolve"]
[host."http://aaa.example:5000"]
  capabilities = ["pull"]
[host."mmm.example/custom/api"]
  override_path = true
''')
    hosts = RegistryHosts.load(tmp_path)
    got = hosts.hosts("docker.io")
    assert _urls(got) == ["https://zzz.example/v2", "http://aaa.example:5000/v2",
                          "https://mmm.example/custom/api", "https://registry-1.docker.io/v2"]
    assert _urls(hosts.endpoints("docker.io", "pull", "resolve")) == [
        "https://zzz.example/v2", "https://mmm.example/custom/api",
        "https://registry-1.docker.io/v2"]
    assert _urls(hosts.endpoints("docker.io", "push")) == [
        "https://mmm.example/custom/api", "https://registry-1.docker.io/v2"]
    assert list(hosts.registries()) == ["docker.io"]


def test_without_server_the_registry_itself_is_last(tmp_path: Path) -> None:
    _write(tmp_path, "gcr.io", '[host."http://127.0.0.1:5000"]\n')
    _write(tmp_path, "_default", 'capabilities = ["pull"]\n[host."https://mirror.example/x"]\n')
    hosts = RegistryHosts.load(tmp_path)
    assert _urls(hosts.hosts("gcr.io")) == ["http://127.0.0.1:5000/v2", "https://gcr.io/v2"]
    # _default applies to every registry without its own dir; its server is that registry
    assert _urls(hosts.hosts("quay.io")) == ["https://mirror.example/x/v2", "https://quay.io/v2"]
    assert hosts.hosts("quay.io")[1].capabilities == {"pull"}
    assert _urls(hosts.hosts("docker.io"))[-1] == "https://registry-1.docker.io/v2"
    assert hosts.hosts("quay.io")[0] is hosts.hosts("quay.io")[0]  # made once, TLS reused


def test_server_path_and_override_path(tmp_path: Path) -> None:
    base = tmp_path
    got = parse_hosts_toml('server = "https://r.example/v2"', base, "r.example")
    assert _urls(got) == ["https://r.example/v2"]
    got = parse_hosts_toml('server = "https://r.example/a/b/"', base, "r.example")
    assert _urls(got) == ["https://r.example/a/b/v2"]
    got = parse_hosts_toml('server = "http://r.example/api"\noverride_path = true', base, "x")
    assert _urls(got) == ["http://r.example/api"]


def test_port_dir_names(tmp_path: Path) -> None:
    assert host_dir_names("r.example:5000") == ["r.example_5000_", "r.example:5000", "_default"]
    assert host_dir_names("r.example") == ["r.example", "_default"]
    _write(tmp_path, "r.example_5000_", 'server = "http://a.example"')
    _write(tmp_path, "r.example:5000", 'server = "http://b.example"')
    _write(tmp_path, "q.example:5000", 'server = "http://c.example"')
    hosts = RegistryHosts.load(tmp_path)
    assert _urls(hosts.hosts("r.example:5000")) == ["http://a.example/v2"]
    assert _urls(hosts.hosts("q.example:5000")) == ["http://c.example/v2"]


def test_headers_skip_verify_ca_and_client(tmp_path: Path, pki: Pki) -> None:
    d = tmp_path / "r.example"
    d.mkdir()
    for p in (pki.ca, pki.client_cert, pki.client_key):
        (d / p.name).write_bytes(p.read_bytes())
    _write(tmp_path, "r.example", f'''
[host."https://m1.example"]
  ca = "ca.pem"
  client = [["client.pem", "client.key"]]
  header = {{x-one = "1", x-many = ["a", "b"]}}
[host."https://m2.example"]
  skip_verify = true
[host."https://m3.example"]
  ca = ["{pki.ca}", "{pki.other_ca}"]
''')
    m1, m2, m3, server = RegistryHosts.load(tmp_path).hosts("r.example")
    assert m1.ca == (d / "ca.pem",) and m1.client == ((d / "client.pem", d / "client.key"),)
    assert m1.headers == {"x-one": ("1",), "x-many": ("a", "b")}
    assert m1.ssl_context is not None and m1.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert m2.ssl_context is not None and m2.ssl_context.verify_mode == ssl.CERT_NONE
    assert m2.ssl_context.check_hostname is False
    assert m3.ca == (pki.ca, pki.other_ca)
    assert server.ssl_context is None and server.url == "https://r.example/v2"


def test_cert_files_layout(tmp_path: Path, pki: Pki) -> None:
    d = tmp_path / "r.example:5000"
    d.mkdir()
    (d / "ca.crt").write_bytes(pki.ca.read_bytes())
    (d / "client.cert").write_bytes(pki.client_cert.read_bytes())
    (d / "client.key").write_bytes(pki.client_key.read_bytes())
    [host] = RegistryHosts.load(tmp_path).hosts("r.example:5000")
    assert host.url == "https://r.example:5000/v2"
    assert host.ca == (d / "ca.crt",) and host.client == ((d / "client.cert", d / "client.key"),)


def test_built_in_code(pki: Pki) -> None:
    mirror = RegistryHost.from_url("http://127.0.0.1:5000", capabilities=frozenset({"pull"}))
    hosts = RegistryHosts({"gcr.io": [mirror, default_server("gcr.io")]})
    assert _urls(hosts.hosts("gcr.io")) == ["http://127.0.0.1:5000/v2", "https://gcr.io/v2"]
    assert _urls(hosts.endpoints("gcr.io", "resolve")) == ["https://gcr.io/v2"]
    assert _urls(hosts.hosts("quay.io")) == ["https://quay.io/v2"]
    tls = RegistryHost.from_url("https://127.0.0.1:5443", ca=(pki.ca,))
    assert tls.ssl_context is not None
    with pytest.raises(ValueError, match="unknown capability 'fetch'"):
        hosts.endpoints("gcr.io", "fetch")


@pytest.mark.parametrize(("text", "message"), [
    ('server = "https://x"\n[host."https://m"]\n  capabilities = ["pull", "fetch"]\n',
     r"\[host.'https://m'\]: key capabilities: unknown capability 'fetch'"),
    ('capabilities = ["pul"]\n', r"hosts.toml: key capabilities: unknown capability 'pul'"),
    ('server = "https://x"\nmirrors = 1\n', r"hosts.toml: unknown key 'mirrors'"),
    ('[host."https://m"]\n  skip_verfy = true\n',
     r"\[host.'https://m'\]: unknown key 'skip_verfy'"),
    ('[host."https://m"]\n  ca = "missing.pem"\n', r"key ca: cannot load CA file .*missing.pem"),
    ('[host."https://m"]\n  client = "missing.pem"\n', r"key client: cannot load certificate"),
    ('[host."https://m"]\n  client = [["a", "b", "c"]]\n', r"key client: .* not a file or a"),
    ('[host."https://m"]\n  ca = 3\n', r"key ca: expected a string or a list of strings"),
    ('[host."https://m"]\n  skip_verify = "yes"\n', r"key skip_verify: expected true or false"),
    ('[host."https://m"]\n  header = {x = 1}\n', r"key header.x: expected a string"),
    ('server = 5\n', r"key server: expected a URL string"),
    ('[host."ftp://m"]\n', r"scheme 'ftp' is not http or https"),
    ('server = "https://x\n', r"hosts.toml: invalid TOML"),
])
def test_bad_files_are_refused_at_load(tmp_path: Path, text: str, message: str) -> None:
    d = _write(tmp_path, "r.example", text)
    with pytest.raises(HostsConfigError, match=message) as err:
        RegistryHosts.load(tmp_path)
    assert str(d / "hosts.toml") in str(err.value)


def test_bad_certificate_is_refused_at_load(tmp_path: Path, pki: Pki) -> None:
    d = tmp_path / "r.example"
    d.mkdir()
    (d / "bad.pem").write_text("-----BEGIN CERTIFICATE-----\nnot a cert\n")
    (d / "hosts.toml").write_text('[host."https://m"]\n  ca = "bad.pem"\n')
    with pytest.raises(HostsConfigError, match=r"key ca: cannot load CA file .*bad.pem"):
        RegistryHosts.load(tmp_path)
    # a client cert whose key does not match
    (d / "hosts.toml").write_text(
        f'[host."https://m"]\n  client = [["{pki.client_cert}", "{pki.server_key}"]]\n')
    with pytest.raises(HostsConfigError, match=r"key client: cannot load certificate .*client"):
        RegistryHosts.load(tmp_path)
