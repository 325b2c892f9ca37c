"""Talking to Kafka with kafka-python, the same way from every part of the tracker: client settings under Kafka's
names (``kafka_conf``), sending until every record is acknowledged (``delivery``), where a partition really ends
(``log_end``), what a broker can do (``broker_features``) and creating topics (``topics``).

Its own top-level package, beside ``assignors`` and ``offsets_store``: the Spark source and sinks, the feeds, the
commands and the Kafka-topic store all use it, and it uses none of them -- so ``offsets_store`` keeps needing nothing
from ``streaming``.
"""
