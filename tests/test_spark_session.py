"""The session factory's local defaults and overrides, and the missing-Java message."""
from __future__ import annotations

import pytest

from streaming.spark import JavaNotFound, check_java, parse_conf


@pytest.mark.spark
def test_local_defaults_are_applied(spark):
    conf = spark.sparkContext.getConf()
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert "-Xss16m" in conf.get("spark.driver.extraJavaOptions")
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.range(5).selectExpr("sum(id)").first()[0] == 10


def test_parse_conf():
    assert parse_conf(["a.b=1", "c = x=y"]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ValueError, match="key=value"):
        parse_conf(["novalue"])


def test_missing_java_has_a_clear_message(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(JavaNotFound, match="install|Install"):
        check_java()
