"""Talking to Kafka with kafka-python, the same way from every part of the tracker: client settings under Kafka's
names (``kafka_conf``), sending until every record is acknowledged (``delivery``), where a partition really ends
(``log_end``), what a broker can do (``broker_features``) and creating topics (``topics``).

The Spark source and sinks, the feeds, the commands and the Kafka-topic store (``offsets_store.kafka_store``) all
use it, and it uses none of them: it imports nothing else of the tracker, so the store depending on it is no cycle.
(It sits in ``streaming`` because the project's top-level packages are fixed.)
"""
