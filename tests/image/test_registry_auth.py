"""The auth flows of the CRI ``AuthConfig`` shapes against the fake registry: identity token
(OAuth2 refresh grant), registry token (bearer as is), ``auth`` field; secrets stay out of
errors. Also: credentials are asked for with the host actually contacted (a mirror's own)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from image.registries import FakeRegistry
from podkit.image import (
    Credentials,
    ImageStore,
    Registry,
    RegistryError,
    RegistryHost,
    RegistryHosts,
)

pytestmark = pytest.mark.integration


def _ref(fake: FakeRegistry) -> str:
    return f"{fake.host}/test/app:v1"


def test_identity_token_is_exchanged_at_the_token_endpoint(fake_registry: FakeRegistry,
                                                           tmp_path: Path) -> None:
    fake_registry.auth = "bearer"
    reg = Registry(auth=Credentials(identity_token="r3fresh"))
    image = reg.pull(ImageStore(tmp_path / "a"), _ref(fake_registry))
    assert image.name == _ref(fake_registry)
    assert fake_registry.hits["POST /token"] == 1  # one token, cached for the blobs
    with pytest.raises(RegistryError, match="DENIED") as err:
        Registry(auth=Credentials(identity_token="stale-secret"), retries=0).pull(
            ImageStore(tmp_path / "b"), _ref(fake_registry))
    assert "stale-secret" not in str(err.value) and err.value.status == 401


def test_registry_token_is_sent_as_bearer(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.auth = "bearer"
    reg = Registry(auth=Credentials(registry_token="t0k"))
    reg.pull(ImageStore(tmp_path / "a"), _ref(fake_registry))
    assert fake_registry.hits["/token"] == 0 and fake_registry.hits["POST /token"] == 0


def test_auth_field_and_basic(fake_registry: FakeRegistry, tmp_path: Path) -> None:
    fake_registry.auth = "basic"
    creds = Credentials.from_auth(base64.b64encode(b"u:p").decode())
    Registry(auth=creds).pull(ImageStore(tmp_path / "a"), _ref(fake_registry))
    with pytest.raises(RegistryError, match="UNAUTHORIZED") as err:
        Registry(auth=Credentials("u", "n0t-the-password"), retries=0).pull(
            ImageStore(tmp_path / "b"), _ref(fake_registry))
    assert "n0t-the-password" not in str(err.value)
    assert _ref(fake_registry) in str(err.value)


def test_credentials_are_looked_up_by_the_host_contacted(fake_registry: FakeRegistry,
                                                         tmp_path: Path) -> None:
    fake_registry.auth = "basic"
    asked: list[str] = []

    def lookup(host: str) -> Credentials | None:
        asked.append(host)
        return Credentials("u", "p") if host == fake_registry.host else None

    mirror = RegistryHost.from_url(f"http://{fake_registry.host}")
    hosts = RegistryHosts({"mirrored.example": [mirror]})
    image = Registry(auth=lookup, hosts=hosts).pull(ImageStore(tmp_path / "a"),
                                                    "mirrored.example/test/app:v1")
    assert image.name == "mirrored.example/test/app:v1"
    assert set(asked) == {fake_registry.host}
