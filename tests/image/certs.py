"""Test secrets made on the spot: a private CA and its certificates (openssl), bcrypt htpasswd.

Everything is short-lived and written under the test's tmp dir; nothing touches the system
trust store.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
from pathlib import Path

import attrs

from support import require, require_binary

__all__ = ["Pki", "bcrypt_htpasswd", "make_pki"]


@attrs.frozen
class Pki:
    """A CA with one server certificate (for 127.0.0.1) and one client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting only it must fail


def _openssl(*args: str | Path) -> None:
    subprocess.run([require_binary("openssl"), *map(str, args)], check=True,
                   capture_output=True)


def _new_ca(d: Path, name: str) -> tuple[Path, Path]:
    cert, key = d / f"{name}.pem", d / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def _issue(d: Path, name: str, ca: tuple[Path, Path], ext: str) -> tuple[Path, Path]:
    cert, key, csr, extfile = (d / f"{name}.pem", d / f"{name}.key", d / f"{name}.csr",
                               d / f"{name}.ext")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    extfile.write_text(ext)
    _openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
             "-out", cert, "-days", "2", "-extfile", extfile)
    return cert, key


def make_pki(d: Path) -> Pki:
    """A CA, a server cert for IP 127.0.0.1 and a client cert, all in ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    ca = _new_ca(d, "ca")
    server = _issue(d, "server", ca, "subjectAltName=IP:127.0.0.1\n"
                    "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n")
    client = _issue(d, "client", ca, "extendedKeyUsage=clientAuth\n"
                    "keyUsage=critical,digitalSignature\n")
    other, _ = _new_ca(d, "other-ca")
    return Pki(ca[0], server[0], server[1], client[0], client[1], other)


def bcrypt_htpasswd(path: Path, user: str, password: str) -> Path:
    """Write an htpasswd line with a bcrypt hash (what docker-registry accepts) via libcrypt."""
    name = ctypes.util.find_library("crypt")
    require(name, "libcrypt (libxcrypt) for bcrypt hashes")
    lib = ctypes.CDLL(name)
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2b$", 5, None, 0)
    require(salt, "libcrypt without bcrypt support")
    hashed = lib.crypt(password.encode(), salt)
    require(hashed and hashed.startswith(b"$2b$"), "libcrypt without bcrypt support")
    path.write_text(f"{user}:{hashed.decode()}\n")
    return path
