"""Apache Kafka 4.x with a SASL_SSL listener, for the security tests (``tests/brokers/test_security.py``).

Made here: a CA and a server certificate for 127.0.0.1 (the ``cryptography`` package), the broker's key store as
PKCS12 (Java 17 reads it), clients' trust as the CA's PEM (kafka-python reads PEM; Java clients too, with
``ssl.truststore.type=PEM``). SCRAM-SHA-512 credentials are added when the storage is formatted (KIP-900:
``StorageTool format --add-scram``), PLAIN users live in the listener's JAAS line. The PLAINTEXT listener stays, for
the broker's own start-up check; the tests talk to the SASL_SSL one.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from streaming.local.broker import free_port

SCRAM_USER, PLAIN_USER = "tracker", "plain-tracker"


@dataclass
class SecuredKafka:
    kafka: object  # streaming.local.apache_kafka_kraft.KraftKafka
    bootstrap: str  # the SASL_SSL listener
    ca_file: Path
    secrets: dict[str, str]  # what must never be printed: the users' passwords, the key store's

    def stop(self) -> None:
        self.kafka.stop()


def make_certificates(directory: Path, store_password: str) -> tuple[Path, Path]:
    """A CA and a server certificate signed by it for 127.0.0.1 / localhost: (the CA's PEM, the server's PKCS12)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rebalance-tracker test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file, store = directory / "ca.pem", directory / "broker.p12"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker", server_key, server, [ca], serialization.BestAvailableEncryption(store_password.encode())
        )
    )
    return ca_file, store


def start_secured_kafka(directory: Path, version: str = "4") -> SecuredKafka:
    from streaming.local.apache_kafka_kraft import start_kraft_kafka

    passwords = {
        "scram": secrets.token_urlsafe(18),
        "plain": secrets.token_urlsafe(18),
        "store": secrets.token_urlsafe(18),
    }
    ca_file, store = make_certificates(directory, passwords["store"])
    plain_port, secure_port, controller_port = free_port(), free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{secure_port}"
    scram_module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    plain_module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    settings = {
        "listeners": f"{listeners},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": f"{scram_module} required;",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f'{plain_module} required user_{PLAIN_USER}="{passwords["plain"]}";'
        ),
        "listener.name.sasl_ssl.ssl.keystore.type": "PKCS12",
        "listener.name.sasl_ssl.ssl.keystore.location": str(store),
        "listener.name.sasl_ssl.ssl.keystore.password": passwords["store"],
    }
    kafka = start_kraft_kafka(
        version,
        broker_settings=settings,
        ports=(plain_port, controller_port),
        format_args=["--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={passwords['scram']}]"],
    )
    secured = SecuredKafka(kafka, f"127.0.0.1:{secure_port}", ca_file, passwords)
    try:
        wait_until_serving(secured)
    except Exception:
        kafka.stop()
        raise
    return secured


def wait_until_serving(secured: SecuredKafka, timeout_s: float = 30) -> None:
    """The broker answers on PLAINTEXT first; the SASL_SSL listener (and its SCRAM credentials) can lag a little."""
    from kafka import KafkaConsumer

    from tests.broker_history import wait_until

    def answers() -> bool:
        try:
            KafkaConsumer(
                bootstrap_servers=secured.bootstrap,
                bootstrap_timeout_ms=2_000,
                security_protocol="SASL_SSL",
                sasl_mechanism="SCRAM-SHA-512",
                sasl_plain_username=SCRAM_USER,
                sasl_plain_password=secured.secrets["scram"],
                ssl_cafile=str(secured.ca_file),
            ).close()
            return True
        except Exception:
            return False

    wait_until(answers, timeout_s, "the SASL_SSL listener to take a SCRAM client", every_s=0.5)


def client_properties(
    secured: SecuredKafka,
    path: Path,
    mechanism: str = "SCRAM-SHA-512",
    password: str | None = None,
    style: str = "java",
) -> Path:
    """A client properties file for ``--command-config``. ``style`` java: as Kafka's own tools take it (JAAS line,
    PEM trust store); python: kafka-python's names (``sasl.plain.username``, ``ssl.cafile``)."""
    user = SCRAM_USER if mechanism.startswith("SCRAM") else PLAIN_USER
    password = (
        password if password is not None else secured.secrets["scram" if mechanism.startswith("SCRAM") else "plain"]
    )
    lines = ["security.protocol=SASL_SSL", f"sasl.mechanism={mechanism}"]
    if style == "java":
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if mechanism.startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        lines += [
            f'sasl.jaas.config={module} required username="{user}" password="{password}";',
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={secured.ca_file}",
        ]
    else:
        lines += [f"sasl.plain.username={user}", f"sasl.plain.password={password}", f"ssl.cafile={secured.ca_file}"]
    path.write_text("\n".join(lines) + "\n")
    return path
