"""A bundled Tansu broker whose log survives the broker: Tansu keeps it in S3, here a moto S3 server on loopback
(this Tansu build has only the memory, S3 and Postgres engines; Apache Kafka 0.9 keeps its log on disk but cannot
store record headers, which the outputs topic needs). Stopping and starting the broker on the same port is a broker
outage with nothing lost, like a Kafka broker restart."""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from streaming.local.broker import BundledBroker, free_port, start_bundled_broker

BUCKET = "tansu"


class PersistentBroker:
    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's HTTP access log
        self._s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._s3.start()
        host, port = self._s3.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        import boto3

        boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
        ).create_bucket(Bucket=BUCKET)
        self.env = {
            "AWS_ENDPOINT": endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        self.port = free_port()
        self.log_dir = Path(tempfile.mkdtemp(prefix="tansu-s3-"))
        self.broker: BundledBroker | None = None
        self.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.broker = start_bundled_broker(self.port, str(self.log_dir), storage_engine=f"s3://{BUCKET}/", env=self.env)

    def stop(self) -> None:
        """The broker goes away (its port refuses connections); its log stays in S3."""
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def close(self) -> None:
        self.stop()
        self._s3.stop()


def waits_out_an_outage(broker, write: Callable[[], None], what: str = "the write") -> None:
    """Stop ``broker``, run ``write`` and check it is still waiting (not failed) a while later; start the broker
    again and check ``write`` then finishes without an error."""
    broker.stop()
    writer, failure = in_background(write)
    time.sleep(4)
    assert writer.is_alive() and not failure, f"{what} gave up while the broker was away: {failure}"
    broker.start()
    writer.join(120)
    assert not writer.is_alive() and not failure, failure


def in_background(write: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``write`` in a thread (it blocks while the broker is away); what it raises lands in the returned list,
    for the test thread to report."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            write()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, failure
