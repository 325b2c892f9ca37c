"""The Spark shell around the pure core: the Kafka source, the stateful tracker job, its sinks, recovery from the
store, and the SparkSession factory. Only this package (and the commands) import pyspark."""
