"""Local infrastructure on loopback for demos and tests: the bundled brokers (Tansu, Apache Kafka 0.9) and a Spark
standalone cluster."""
