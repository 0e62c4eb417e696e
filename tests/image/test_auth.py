"""Credentials and Docker's config.json: where the file is, lookups (auths, credHelpers,
credsStore), login/logout writes, credential helpers; secrets never in repr or errors."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from podkit.image import AuthFile, CredentialHelperError, Credentials, ImageError, auth_file_path
from podkit.image.auth import credential_helper, registry_key

SECRET = "hunter2-s3cret"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _helper(bindir: Path, name: str, script: str) -> dict[str, str]:
    """A fake ``docker-credential-<name>`` (a shell script); the env whose PATH finds it."""
    bindir.mkdir(exist_ok=True)
    path = bindir / f"docker-credential-{name}"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(bindir)}


def test_credentials_repr_hides_secrets() -> None:
    creds = Credentials("alice", SECRET, identity_token="idtok", registry_token="regtok")
    text = repr(creds) + str(creds)
    assert "alice" in text
    assert SECRET not in text and "idtok" not in text and "regtok" not in text
    assert creds.basic == "Basic " + _b64(f"alice:{SECRET}")
    assert Credentials(registry_token="t").basic is None
    assert Credentials.from_auth(_b64("bob:pa:ss")) == Credentials("bob", "pa:ss")
    with pytest.raises(ImageError, match="not base64") as err:
        Credentials.from_auth(_b64(SECRET))
    assert SECRET not in str(err.value)


def test_from_cri_auth_config_fields() -> None:
    assert Credentials.from_fields() is None
    assert Credentials.from_fields(username="u", password="p", auth=_b64("x:y")) == \
        Credentials("u", "p")
    assert Credentials.from_fields(auth=_b64("x:y")) == Credentials("x", "y")
    assert Credentials.from_fields(identity_token="i") == Credentials(identity_token="i")
    assert Credentials.from_fields(registry_token="r", username="u") == \
        Credentials("u", registry_token="r")
    with pytest.raises(ImageError, match="not base64") as err:
        Credentials.from_fields(auth=SECRET)
    assert SECRET not in str(err.value)


def test_auth_file_path_precedence(tmp_path: Path) -> None:
    env = {"HOME": "/home/u"}
    assert auth_file_path(None, env) == Path("/home/u/.docker/config.json")
    env["DOCKER_CONFIG"] = "/etc/dc"
    assert auth_file_path(None, env) == Path("/etc/dc/config.json")
    env["REGISTRY_AUTH_FILE"] = "/run/auth.json"
    assert auth_file_path(None, env) == Path("/run/auth.json")
    assert auth_file_path(tmp_path / "a.json", env) == tmp_path / "a.json"


def test_auths_lookup_spellings(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"auths": {
        "https://index.docker.io/v1/": {"auth": _b64("hub:1")},
        "https://quay.io": {"auth": _b64("quay:2")},
        "127.0.0.1:5000": {"auth": _b64("local:3"), "identitytoken": "idt"},
        "tok.example": {"registrytoken": "rt"},
        "empty.example": {},
    }}))
    auth = AuthFile(path)
    assert auth.credentials("docker.io") == Credentials("hub", "1")
    assert auth("registry-1.docker.io") == Credentials("hub", "1")
    assert auth("quay.io") == Credentials("quay", "2")
    assert auth("127.0.0.1:5000") == Credentials("local", "3", identity_token="idt")
    assert auth("tok.example") == Credentials(registry_token="rt")
    assert auth("empty.example") is None
    assert auth("gcr.io") is None
    assert AuthFile(tmp_path / "none.json")("gcr.io") is None


def test_bad_files_name_the_file_not_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"auths": {"r.example": {"auth": "' + SECRET + '"}}}')
    with pytest.raises(ImageError, match=r"config.json: key auths.r.example.auth") as err:
        AuthFile(path)("r.example")
    assert SECRET not in str(err.value)
    path.write_text("{not json " + SECRET)
    with pytest.raises(ImageError, match=r"config\.json: not JSON") as err:
        AuthFile(path)("r.example")
    assert SECRET not in str(err.value)


def test_login_logout_write_like_docker(tmp_path: Path) -> None:
    path = tmp_path / "d" / "config.json"
    auth = AuthFile(path)
    auth.login("127.0.0.1:5000", Credentials("alice", SECRET))
    auth.login("docker.io", Credentials("hub", "x"))
    data = json.loads(path.read_text())
    assert data["auths"]["127.0.0.1:5000"] == {"auth": _b64(f"alice:{SECRET}")}
    assert data["auths"][registry_key("docker.io")] == {"auth": _b64("hub:x")}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert auth("127.0.0.1:5000") == Credentials("alice", SECRET)
    # other keys survive a rewrite
    data["credHelpers"] = {"gcr.io": "gcloud"}
    path.write_text(json.dumps(data))
    assert auth.logout("127.0.0.1:5000") is True
    assert auth.logout("127.0.0.1:5000") is False
    data = json.loads(path.read_text())
    assert data["credHelpers"] == {"gcr.io": "gcloud"}
    assert list(data["auths"]) == ["https://index.docker.io/v1/"]
    assert auth.logout("docker.io") is True
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]  # no temp files left


def test_credential_helpers(tmp_path: Path) -> None:
    env = _helper(tmp_path / "bin", "fake", f'''read server
case "$server" in
  r.example) echo '{{"ServerURL":"r.example","Username":"helper","Secret":"{SECRET}"}}' ;;
  tok.example) echo '{{"Username":"<token>","Secret":"idtok"}}' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
''')
    assert credential_helper("fake", "r.example", env=env) == Credentials("helper", SECRET)
    assert credential_helper("fake", "tok.example", env=env) == \
        Credentials(identity_token="idtok")
    assert credential_helper("fake", "other.example", env=env) is None
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"credHelpers": {"r.example": "fake"}, "credsStore": "fake",
                                "auths": {"r.example": {"auth": _b64("file:no")}}}))
    auth = AuthFile(path, env=env)
    assert auth("r.example") == Credentials("helper", SECRET)  # credHelpers before auths
    assert auth("tok.example") == Credentials(identity_token="idtok")  # credsStore
    assert auth("nothing.example") is None
    with pytest.raises(CredentialHelperError, match="docker-credential-gone not found"):
        credential_helper("gone", "r.example", env=env)


def test_credential_helper_failure_does_not_leak_its_output(tmp_path: Path) -> None:
    env = _helper(tmp_path / "bin", "leaky", f"echo 'oops {SECRET}' >&2\nexit 3\n")
    with pytest.raises(CredentialHelperError, match="exit status 3") as err:
        credential_helper("leaky", "r.example", env=env)
    assert SECRET not in str(err.value)
    env = _helper(tmp_path / "bin", "garbled", f"echo 'Secret={SECRET}'\n")
    with pytest.raises(CredentialHelperError, match="not JSON") as err:
        credential_helper("garbled", "r.example", env=env)
    assert SECRET not in str(err.value)
    env = _helper(tmp_path / "bin", "slow", "exec sleep 30\n")
    with pytest.raises(CredentialHelperError, match=r"no answer in 0\.3s"):
        credential_helper("slow", "r.example", env=env, timeout=0.3)
    assert os.environ.get("PATH")  # the process env is untouched
