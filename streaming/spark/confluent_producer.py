"""The sink's producer over confluent-kafka (librdkafka), with the calls of kafka-python's ``KafkaProducer`` the sink
and ``streaming.kafka_client.delivery.send_until_delivered`` use: ``send`` (returns a future with ``get``),
``flush``, ``close``.

Why: kafka-python's ``send`` costs ~40 us of the driver's CPU a record (measured in the benchmark's sink); librdkafka
batches and sends in its own C threads. The sink uses it when the job reads with confluent-kafka too
(``--kafka-source confluent``: a user who chose librdkafka for one has it for both) and beside Spark's connector
(``builtin``), which reads brokers from 0.10 on, as librdkafka does: its sink cost 22 us an output with
kafka-python's send, 9 us with this one (benchmarks/streaming.py)."""

from __future__ import annotations

from streaming.spark.kafka_source import confluent_config

# librdkafka's errors that say "the broker is not there (yet)", on top of those it calls retriable itself.
_GONE = (
    "_MSG_TIMED_OUT",
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_TIMED_OUT",
    "_RESOLVE",
    "_PURGE_QUEUE",
    "_PURGE_INFLIGHT",
)


class DeliveryFailed(Exception):
    """A record librdkafka could not deliver; ``retriable`` as ``send_until_delivered`` reads it."""

    def __init__(self, error):
        super().__init__(f"{error.name()}: {error.str()}")
        self.retriable = bool(error.retriable()) or error.name() in _GONE


class NotDelivered(Exception):
    """``flush`` returned with the record still queued: the broker did not take it in time."""

    retriable = True


class Delivery:
    """A record's future: settled by librdkafka's delivery report (served in ``flush``)."""

    __slots__ = ("error", "settled")

    def __init__(self):
        self.error = None
        self.settled = False

    def report(self, error, message) -> None:
        self.error, self.settled = error, True

    def get(self, timeout: float = 0):
        if not self.settled:
            raise NotDelivered("the record was not acknowledged before flush returned")
        if self.error is not None:
            raise DeliveryFailed(self.error)


class ConfluentProducer:
    def __init__(
        self, bootstrap: str, client: dict, *, client_id: str, linger_ms: int = 5, delivery_timeout_ms: int = 120_000
    ):
        from confluent_kafka import Producer

        settings = confluent_config(dict(client, bootstrap_servers=bootstrap))
        self._producer = Producer(
            settings
            | {
                "client.id": client_id,
                "acks": "all",
                "linger.ms": linger_ms,
                # The same partition as Kafka's Java client and kafka-python for the same key (librdkafka's default
                # hashes with CRC32): a group's events appended to the events topic must land with the group's others.
                "partitioner": "murmur2_random",
                # Retries keep the order of a partition's records: readers drop a re-sent batch by its headers.
                "max.in.flight.requests.per.connection": 1,
                "message.timeout.ms": delivery_timeout_ms,
            }
        )  # kafka-python's delivery_timeout_ms default

    def send(
        self, topic: str, key: bytes | None = None, value: bytes | None = None, headers: list | None = None
    ) -> Delivery:
        delivery = Delivery()
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, headers=headers, on_delivery=delivery.report)
                return delivery
            except BufferError:  # librdkafka's queue is full: let it send (and report) some first
                self._producer.poll(0.1)

    def flush(self, timeout: float | None = None) -> None:
        self._producer.flush(-1 if timeout is None else timeout)

    def close(self, timeout: float | None = None) -> None:
        """``timeout=0``: drop what is queued (the producer is being replaced after an outage); else deliver it."""
        if timeout == 0:
            self._producer.purge()
            self._producer.flush(0)  # serve the purged records' reports
        else:
            self._producer.flush(-1 if timeout is None else timeout)
