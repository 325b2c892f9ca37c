"""Kafka client settings in one place: Kafka's names in, kafka-python's keyword arguments out.

Every command that talks to Kafka takes ``--kafka-conf KEY=VALUE`` (repeatable) and ``--command-config FILE`` (a
properties file, as Kafka's own tools take; ``--kafka-conf`` wins over it): ``api.version=0.9``,
``security.protocol=SASL_SSL``, ``sasl.mechanism=PLAIN``, ``sasl.plain.username=...``, ``ssl.cafile=...``,
``client.id=...``. A name is kafka-python's with dots for underscores (``request.timeout.ms`` ->
``request_timeout_ms``); a value is typed as kafka-python's default for that name is (``api.version=0.9`` ->
``(0, 9)``, numbers, booleans). From a Java client's file, ``sasl.jaas.config`` (PLAIN / SCRAM) gives the username and
password, ``ssl.endpoint.identification.algorithm`` the host-name check, and PEM stores (``ssl.truststore.type=PEM``
with ``ssl.truststore.location``: the CA certificates; ``ssl.keystore.type=PEM``: the client's certificate chain and
key, ``ssl.key.password``) the files kafka-python reads -- so one file serves this tool's Python clients and Java
clients (Spark's own Kafka connector) alike. Secrets are never printed: ``describe`` shows them as ``****``, and
errors name only the setting. ``access_error`` tells, in one line, why a secured broker refuses these settings.
"""

from __future__ import annotations

import argparse
import logging
import re
import threading
import uuid
from typing import Any

SECRET = re.compile(r"password|secret|token|jaas|credential|key", re.IGNORECASE)
# kafka-python settings that are Python objects, not text.
_NOT_TEXT = {
    "kafka_client",
    "selector",
    "partitioner",
    "key_serializer",
    "value_serializer",
    "key_deserializer",
    "value_deserializer",
    "default_offset_commit_callback",
    "socket_options",
    "metric_reporters",
    "ssl_context",
    "sasl_oauth_token_provider",
    "partition_assignment_strategy",
}
# Java's PEM stores and what kafka-python takes for them (other store types are Java key stores it cannot read).
_PEM_STORES = {"ssl.truststore.": "ssl_cafile", "ssl.keystore.": "ssl_certfile"}


def _defaults() -> dict[str, Any]:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    out: dict[str, Any] = {}
    for cls in (KafkaAdminClient, KafkaProducer, KafkaConsumer):
        out.update(cls.DEFAULT_CONFIG)
    return out


# ------------------------------------------------------------------ reading settings
def parse_pairs(pairs: list[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` to a dict; a malformed pair is reported without its value (it may be a password)."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError("--kafka-conf expects KEY=VALUE; one was given without '=' or without a key")
        out[key.strip()] = value.strip()
    return out


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments; a trailing
    backslash continues a line)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        logical = ""
        for raw in f.read().splitlines():
            line = raw.strip() if not logical else raw.lstrip()
            if not logical and (not line or line[0] in "#!"):
                continue
            if line.endswith("\\") and not line.endswith("\\\\"):
                logical += line[:-1]
                continue
            logical += line
            match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", logical)
            if match:
                out[match.group(1)] = match.group(2).strip()
            logical = ""
    return out


def add_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--kafka-conf KEY=VALUE`` (repeatable) and ``--command-config FILE`` (``prefix`` names a second cluster)."""
    name = f"--{prefix}kafka-conf"
    parser.add_argument(
        name,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka client setting under Kafka's name, e.g. api.version=0.9, "
        "security.protocol=SASL_SSL; repeat for several",
    )
    parser.add_argument(
        f"--{prefix}command-config",
        action="append",
        default=[],
        metavar="FILE",
        help="a properties file of Kafka client settings (like Kafka's tools' --command-config)",
    )


def from_args(args: argparse.Namespace, prefix: str = "") -> dict[str, str]:
    """The settings a command was given: its properties files, then its ``--kafka-conf`` pairs."""
    attr = prefix.replace("-", "_")
    props: dict[str, str] = {}
    for path in getattr(args, f"{attr}command_config") or []:
        props.update(read_properties(path))
    props.update(parse_pairs(getattr(args, f"{attr}kafka_conf")))
    return props


# ------------------------------------------------------------------ Kafka's names -> kafka-python's arguments
def to_kwargs(props: dict[str, Any]) -> dict[str, Any]:
    """kafka-python keyword arguments for Kafka-style settings; ``ValueError`` names a setting it cannot use."""
    defaults = _defaults()
    out: dict[str, Any] = {}
    for key, value in props.items():
        key = key.strip()
        if key == "sasl.jaas.config":
            out.update(_jaas(str(value)))
            continue
        if key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = bool(str(value).strip())  # "" turns the check off, "https" on
            continue
        if key == "ssl.key.password":
            out["ssl_password"] = str(value)
            continue
        store = next((prefix for prefix in _PEM_STORES if key.startswith(prefix)), None)
        if store is not None:
            out.update(_pem_store(store, props))
            continue
        name = key.replace(".", "_").replace("-", "_")
        if name not in defaults or name in _NOT_TEXT:
            raise ValueError(f"unknown Kafka client setting {key!r} (kafka-python has no {name} to set from text)")
        out[name] = _typed(key, name, value, defaults[name])
    return out


def _typed(key: str, name: str, value: Any, default: Any) -> Any:
    if not isinstance(value, str):
        return tuple(value) if name == "api_version" and isinstance(value, list) else value
    text = value.strip()
    if name == "api_version":
        if text.lower() in ("", "auto"):
            return None  # kafka-python asks the broker
        if not re.fullmatch(r"\d+(\.\d+)*", text):
            raise ValueError(f"{key} must be a version such as 0.9 or 2.8.1")
        return tuple(int(part) for part in text.split("."))
    if isinstance(default, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false")
        return text.lower() == "true"
    numeric = isinstance(default, (int, float)) or (default is None and name.endswith(("_ms", "_bytes")))
    if numeric:
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                if name == "acks":
                    return text  # acks=all
                raise ValueError(f"{key} must be a number") from None
    return text


def _pem_store(prefix: str, props: dict[str, Any]) -> dict[str, str]:
    """A Java client's PEM store as the file kafka-python reads (a PEM trust store is a CA bundle; a PEM key store
    the certificate chain with its key). Its password, if any, is not needed: Kafka's PEM stores take none."""
    kind = str(props.get(f"{prefix}type", "JKS")).strip().upper()
    location = props.get(f"{prefix}location")
    if kind != "PEM":
        raise ValueError(
            f"{prefix}type {kind}: kafka-python reads PEM files, not Java key stores; give "
            f"{prefix}type=PEM with a PEM file, or ssl.cafile / ssl.certfile / ssl.keyfile"
        )
    if not location:
        raise ValueError(f"{prefix}type=PEM needs {prefix}location (the PEM file)")
    return {_PEM_STORES[prefix]: str(location).strip()}


def _jaas(config: str) -> dict[str, str]:
    """username / password of a PlainLoginModule or ScramLoginModule line."""
    if not re.search(r"\b(PlainLoginModule|ScramLoginModule)\b", config):
        raise ValueError(
            "sasl.jaas.config: only PlainLoginModule and ScramLoginModule can be read; give "
            "sasl.plain.username and sasl.plain.password instead"
        )
    fields = {k: re.sub(r"\\(.)", r"\1", v) for k, v in re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', config)}
    if "username" not in fields or "password" not in fields:
        raise ValueError('sasl.jaas.config: no username="..." password="..." in it')
    return {"sasl_plain_username": fields["username"], "sasl_plain_password": fields["password"]}


def for_client(cls, client: dict | None, **ours) -> dict:
    """Keyword arguments for one kafka-python class (``KafkaConsumer``, ``KafkaProducer``, ``KafkaAdminClient``):
    ``ours`` (the caller's defaults, such as its client id) overridden by the user's ``client`` settings that this
    class takes; a ``bootstrap_servers`` of ``ours`` always wins."""
    accepted = {k: v for k, v in (client or {}).items() if k in cls.DEFAULT_CONFIG}
    if "bootstrap_servers" in ours:
        accepted.pop("bootstrap_servers", None)
    return {**ours, **accepted}


def spark_options(props: dict[str, str]) -> dict[str, str]:
    """Settings as options of a Spark Kafka source (``kafka.``-prefixed; the bootstrap is given separately)."""
    return {f"kafka.{k}": str(v) for k, v in props.items() if k != "bootstrap.servers"}


# ------------------------------------------------------------------ will the broker take them?
def access_error(bootstrap: str, client: dict | None, timeout_s: float = 10.0) -> str | None:
    """Why the broker at ``bootstrap`` refuses a client with these (kafka-python) settings, as one line naming no
    secret: its SASL credentials or mechanism, or the TLS handshake. None when it takes them -- or when it cannot be
    reached at all, which each command handles its own way. Plaintext clients are not probed.

    kafka-python retries a refused connection until its bootstrap times out and then only says it timed out; the
    reason is in what it logs meanwhile (the exception it hands its logger), which this reads, quietly."""
    client = client or {}
    protocol = str(client.get("security_protocol") or "PLAINTEXT").upper()
    if protocol == "PLAINTEXT":
        return None
    from kafka import KafkaConsumer
    from kafka import errors as kafka_errors

    refused = threading.Event()
    found: list[str] = []

    def reason(exc: BaseException) -> str | None:
        text = str(exc)
        if isinstance(exc, kafka_errors.SaslAuthenticationFailedError):
            detail = text.rsplit(": ", 1)[-1]
            user = client.get("sasl_plain_username")
            return (
                f"{bootstrap} refused the credentials{f' of user {user!r}' if user else ''} ({protocol}, "
                f"{client.get('sasl_mechanism') or 'no SASL mechanism'}): {detail}"
            )
        if isinstance(exc, kafka_errors.UnsupportedSaslMechanismError) or "UnsupportedSaslMechanism" in text:
            return f"{bootstrap} does not take SASL mechanism {client.get('sasl_mechanism')!r} ({protocol})"
        if "Handshake failed" in text or "SSL" in text and "certificate" in text.lower():
            detail = re.sub(r"^.*Handshake failed: (\[SSL[^\]]*\] )?", "", text).split(" (_ssl.c")[0]
            return (
                f"the TLS handshake with {bootstrap} failed ({protocol}): {detail}; is ssl.cafile (or "
                f"ssl.truststore.location) the CA that signed the broker's certificate?"
            )
        return None

    # Whose lines: kafka-python's IO thread is named after the client id; before it runs, the probe's own thread logs.
    client_id = f"rebalance-tracker-check-{uuid.uuid4().hex[:8]}"
    threads = {f"kafka-io-{client_id}", f"kafka-access-check-{client_id}"}

    sasl = protocol.startswith("SASL")
    disconnects = []  # a refused SASL attempt may end as a bare disconnect, its answer unread

    class Refusals(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.threadName not in threads:
                return
            for arg in record.args if isinstance(record.args, tuple) else ():
                if not isinstance(arg, BaseException):
                    continue
                why = reason(arg)
                if why is None and sasl and record.name == "kafka.net.manager" and "socket disconnected" in str(arg):
                    disconnects.append(arg)
                    if len(disconnects) >= 5:
                        user = client.get("sasl_plain_username")
                        why = (
                            f"{bootstrap} closed the connection while authenticating"
                            f"{f' user {user!r}' if user else ''} ({protocol}, {client.get('sasl_mechanism')}), "
                            f"again and again: wrong credentials, or a mechanism it does not take?"
                        )
                if why is not None:
                    found.append(why)
                    refused.set()

    handler = Refusals(logging.WARNING)

    def probe() -> None:
        try:
            # Retried often: a refused SASL attempt can end as a bare disconnect before its answer is read.
            KafkaConsumer(
                **for_client(KafkaConsumer, client, bootstrap_servers=bootstrap)
                | {
                    "client_id": client_id,
                    "bootstrap_timeout_ms": int(timeout_s * 1000),
                    "reconnect_backoff_ms": 50,
                    "reconnect_backoff_max_ms": 500,
                }
            ).close()
        except Exception:
            pass
        finally:  # kafka-python's own lines stay quiet until its last retry is over
            _quiet_kafka(handler, False)
            refused.set()  # done either way: taken, or unreachable (no refusal found)

    _quiet_kafka(handler, True)
    threading.Thread(target=probe, name=f"kafka-access-check-{client_id}", daemon=True).start()
    refused.wait(timeout_s + 5)
    return found[0] if found else None


def refusal(bootstraps: list[str | None], client: dict | None) -> str | None:
    """``access_error`` for each broker a command talks to (each once; None entries skipped): the first refusal."""
    for bootstrap in dict.fromkeys(b for b in bootstraps if b):
        error = access_error(bootstrap, client)
        if error is not None:
            return error
    return None


_quiet = {"probes": 0, "saved": (True, logging.NOTSET)}
_quiet_lock = threading.Lock()


def _quiet_kafka(handler: logging.Handler, on: bool) -> None:
    """While any probe runs, kafka-python's logger goes to the probes' handlers only (it would print a line for each
    retry of a refused connection); the last one done puts it back as it was."""
    logger = logging.getLogger("kafka")
    with _quiet_lock:
        if on:
            if _quiet["probes"] == 0:
                _quiet["saved"] = logger.propagate, logger.level
            logger.propagate = False
            if logger.getEffectiveLevel() > logging.WARNING:  # (a command may have silenced it meanwhile)
                logger.setLevel(logging.WARNING)
            _quiet["probes"] += 1
            logger.addHandler(handler)
        else:
            logger.removeHandler(handler)
            _quiet["probes"] -= 1
            if _quiet["probes"] == 0:
                logger.propagate, logger.level = _quiet["saved"]


# ------------------------------------------------------------------ printing them
def redacted(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: "****" if SECRET.search(k) else v for k, v in settings.items()}


def describe(settings: dict[str, Any]) -> str:
    """``k=v, ...`` with secrets hidden, for a command's summary line."""
    shown = redacted(settings)
    return ", ".join(f"{k}={'.'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in shown.items())
