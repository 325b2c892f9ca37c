"""Kafka client settings in one place: Kafka's names in, kafka-python's keyword arguments out.

Every command that talks to Kafka takes ``--kafka-conf KEY=VALUE`` (repeatable) and ``--command-config FILE`` (a
properties file, as Kafka's own tools take; ``--kafka-conf`` wins over it): ``api.version=0.9``,
``security.protocol=SASL_SSL``, ``sasl.mechanism=PLAIN``, ``sasl.plain.username=...``, ``ssl.cafile=...``,
``client.id=...``. A name is kafka-python's with dots for underscores (``request.timeout.ms`` ->
``request_timeout_ms``); a value is typed as kafka-python's default for that name is (``api.version=0.9`` ->
``(0, 9)``, numbers, booleans). From a Java client's file, ``sasl.jaas.config`` (PLAIN / SCRAM) gives the username and
password and ``ssl.endpoint.identification.algorithm`` the host-name check. Secrets are never printed:
``describe`` shows them as ``****``, and errors name only the setting.
"""
from __future__ import annotations

import argparse
import re
from typing import Any

SECRET = re.compile(r"password|secret|token|jaas|credential|key", re.IGNORECASE)
# kafka-python settings that are Python objects, not text.
_NOT_TEXT = {"kafka_client", "selector", "partitioner", "key_serializer", "value_serializer", "key_deserializer",
             "value_deserializer", "default_offset_commit_callback", "socket_options", "metric_reporters",
             "ssl_context", "sasl_oauth_token_provider", "partition_assignment_strategy"}
_JAVA_STORES = ("ssl.truststore.", "ssl.keystore.")


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
    parser.add_argument(name, action="append", default=[], metavar="KEY=VALUE",
                        help="a Kafka client setting under Kafka's name, e.g. api.version=0.9, "
                             "security.protocol=SASL_SSL; repeat for several")
    parser.add_argument(f"--{prefix}command-config", action="append", default=[], metavar="FILE",
                        help="a properties file of Kafka client settings (like Kafka's tools' --command-config)")


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
            out["ssl_check_hostname"] = bool(str(value).strip())   # "" turns the check off, "https" on
            continue
        if key.startswith(_JAVA_STORES):
            raise ValueError(f"{key}: kafka-python reads PEM files, not Java key stores; give ssl.cafile, "
                             f"ssl.certfile and ssl.keyfile instead")
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
            return None   # kafka-python asks the broker
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
                    return text   # acks=all
                raise ValueError(f"{key} must be a number") from None
    return text


def _jaas(config: str) -> dict[str, str]:
    """username / password of a PlainLoginModule or ScramLoginModule line."""
    if not re.search(r"\b(PlainLoginModule|ScramLoginModule)\b", config):
        raise ValueError("sasl.jaas.config: only PlainLoginModule and ScramLoginModule can be read; give "
                         "sasl.plain.username and sasl.plain.password instead")
    fields = {k: re.sub(r"\\(.)", r"\1", v) for k, v in re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', config)}
    if "username" not in fields or "password" not in fields:
        raise ValueError("sasl.jaas.config: no username=\"...\" password=\"...\" in it")
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


# ------------------------------------------------------------------ printing them
def redacted(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: "****" if SECRET.search(k) else v for k, v in settings.items()}


def describe(settings: dict[str, Any]) -> str:
    """``k=v, ...`` with secrets hidden, for a command's summary line."""
    shown = redacted(settings)
    return ", ".join(f"{k}={'.'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in shown.items())
