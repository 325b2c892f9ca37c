"""The two pytest-xdist groups of the tests that use Spark or brokers (how they are chosen: tests/conftest.py)."""

SHARED_JVM = "shared-jvm"  # the session's SparkSession, brokers and broker histories
OWN_PROCESSES = "own-processes"  # tests that run the tracker, consumers or brokers as processes of their own
