"""A certificate authority of korpus's own for loopback parts: the topology's Dask (scheduler, workers and their
clients authenticate each other by certificate) and the tests' TLS endpoints. Made once under a folder that only its
owner reads; never a certificate for a public name — a many-machine deployment brings its own (docs/topology.md).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Credentials:
    ca: Path
    """The CA's certificate (PEM): what a peer's certificate is verified against."""
    cert: Path
    """A certificate the CA signed for 127.0.0.1 and localhost (server and client use)."""
    key: Path
    """Its private key (PEM, unencrypted, mode 0600)."""


def loopback_credentials(folder: Path, days: int = 3650) -> Credentials:
    """The CA and a loopback certificate under `folder` (mode 0700), made on the first call and reused after."""
    found = Credentials(folder / "ca.pem", folder / "loopback.pem", folder / "loopback.key")
    if all(path.is_file() for path in (found.ca, found.cert, found.key)):
        return found
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    now = datetime.datetime.now(datetime.UTC)

    def signed(subject: str, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey, ca: bool):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "korpus loopback CA")]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    pem = serialization.Encoding.PEM
    found.ca.write_bytes(signed("korpus loopback CA", ca_key, ca_key, ca=True).public_bytes(pem))
    found.cert.write_bytes(signed("127.0.0.1", key, ca_key, ca=False).public_bytes(pem))
    fd = os.open(found.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return found
