"""Keys, certificates and kubeconfig documents for the e2e control plane (`tests.e2e.kubeenv`).

- `Pki` is a throwaway CA (ECDSA P-256) issuing the apiserver's serving certificate and client identities.
- `service_account_keys` makes the service-account token signing key.
- `kubeconfig` builds a self-contained kubeconfig; `write_private` writes a file readable only by its owner.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    flags = dict.fromkeys(
        [
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ],
        False,
    )
    return x509.KeyUsage(digital_signature=True, key_cert_sign=ca, crl_sign=ca, **flags)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


class Pki:
    """A throwaway CA (ECDSA P-256) that issues the serving certificate and client identities.

    The same CA is the apiserver's --client-ca-file and the clients' certificate-authority, which is
    what kubeadm does too (there it is also the kubelet-facing CA).
    """

    def __init__(self, common_name: str = "brokergroup-e2e-ca", valid_for: datetime.timedelta | None = None) -> None:
        self._valid_for = valid_for or datetime.timedelta(days=7)
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        public = self._key.public_key()
        self.cert = (
            self._builder(name, name, public)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.ca = KeyPair(self.cert.public_bytes(serialization.Encoding.PEM), _pem_key(self._key))

    def _builder(
        self, subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey
    ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + self._valid_for)
        )

    def issue(
        self,
        common_name: str,
        *,
        organizations: Iterable[str] = (),
        dns_names: Iterable[str] = (),
        ip_addresses: Iterable[str] = (),
        server: bool = False,
    ) -> KeyPair:
        """A leaf certificate: a client identity (CN = user, one O per group) or, with `server`, a serving cert."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
            + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        )
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            self._builder(subject, self.cert.subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def service_account_keys() -> KeyPair:
    """The service-account token signing key (ES256): `cert_pem` holds the PEM public key."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyPair(public, _pem_key(key))


def kubeconfig(server: str, ca_pem: bytes, user: str, identity: KeyPair) -> dict[str, Any]:
    """A self-contained kubeconfig (certificates inline). JSON is YAML, so it is written as JSON."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": b64(identity.cert_pem), "client-key-data": b64(identity.key_pem)},
            }
        ],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
        "preferences": {},
    }


def write_private(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path
