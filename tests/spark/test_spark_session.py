"""The session factory's local defaults and overrides, and the missing-Java message."""

from __future__ import annotations

import pytest

from streaming.spark.session import JavaNotFound, check_java, parse_conf


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


def test_python_workers_run_this_interpreter_unless_told_otherwise(monkeypatch):
    import sys

    from streaming.spark.session import worker_python

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert worker_python() == sys.executable  # any master: not whatever python3 is on PATH
    assert worker_python({"spark.pyspark.python": "/opt/env/bin/python"}) == "/opt/env/bin/python"
    monkeypatch.setenv("PYSPARK_PYTHON", "./env/bin/python")
    assert worker_python({"spark.pyspark.python": "/opt/env/bin/python"}) == "./env/bin/python"


def test_which_masters_get_the_code_shipped():
    from streaming.spark.session import is_local_master

    assert all(is_local_master(m) for m in ("local", "local[2]", "local[*]", "local[4,3]"))
    assert not any(
        is_local_master(m)
        for m in ("spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "yarn", "k8s://https://host:443", None)
    )


def test_code_archive_holds_the_packages_this_process_imports(tmp_path):
    import zipfile
    from pathlib import Path

    import streaming
    from streaming.spark.session import CODE_PACKAGES, code_archive

    archive = code_archive(tmp_path)
    (tmp_path / "again").mkdir()
    assert code_archive(tmp_path / "again").name == archive.name  # named by content: same code, same name
    root = Path(streaming.__file__).parent.parent  # this checkout (pytest puts it first)
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        assert {
            "streaming/spark/job.py",
            "streaming/spark/kafka_source.py",
            "assignors/__init__.py",
            "offsets_store/codec.py",
        } <= names
        assert all(n.split("/")[0] in CODE_PACKAGES and n.endswith(".py") and "__pycache__" not in n for n in names)
        for name in names:
            assert z.read(name) == (root / name).read_bytes(), name
