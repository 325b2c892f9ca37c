"""The test suite, by area (each a package, so ``tests.<area>.<module>`` names are unique):

- ``assignors/``: the client- and server-side assignors, their properties, and Kafka's own classes as oracle
- ``core/``: the pure coordinators (classic and consumer protocol), observe mode, figures, restore rule, Java hashes
- ``offsets/``: the ``__consumer_offsets`` codec and the SQLite and Kafka-topic stores
- ``spark/``: the Spark shell: the job's stages, the Kafka source, the sinks, the session, crash paths
- ``tracker/``: the whole tracker running: restarts, kills, broker outages, lost checkpoints, a Spark cluster
- ``feeds/``: the simulator, the instrumentation, the cluster feed, partitioners, the metadata watcher
- ``views/``: history, report, replay, metrics, the live table and progress bars
- ``brokers/``: the local brokers, Apache Kafka 0.9 and 4.x as the truth, client settings, security
- ``cli/``: the commands as a person types them, README's and ``docs/``'s examples included

Here at the top: ``conftest.py`` (the session's broker, SparkSession, Apache Kafka and oracle fixtures, and the
grouping that keeps every test using them in one pytest-xdist worker) and the harnesses several areas share
(coordinator and consumer harnesses, broker histories, the job as a process, ...).
"""
