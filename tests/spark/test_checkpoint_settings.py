"""A checkpoint keeps the settings its state was built with: a restart under another keying is refused, clearly, before
Spark starts, instead of looking for every group under keys it was never stored under."""

from __future__ import annotations

import json

import pytest

from streaming.cli.main import main
from streaming.spark.checkpoint_settings import FILE, CheckpointSettingsChanged, check_and_record, job_settings

BY_GROUP = job_settings("group", "processing", 50)
BY_PARTITION = job_settings("coordinator-partition", "processing", 50)


def test_the_first_start_records_and_a_restart_with_the_same_settings_passes(tmp_path):
    check_and_record(str(tmp_path), True, BY_GROUP)
    assert json.loads((tmp_path / FILE).read_text()) == BY_GROUP
    check_and_record(str(tmp_path), False, BY_GROUP)
    # The partition count does not matter when the state is keyed by group id.
    check_and_record(str(tmp_path), False, job_settings("group", "processing", 12))


@pytest.mark.parametrize(
    "restart, named",
    [
        (BY_PARTITION, "state_key 'group' -> 'coordinator-partition'"),
        (job_settings("group", "event", 50), "time_mode 'processing' -> 'event'"),
    ],
)
def test_a_restart_under_other_settings_is_refused(tmp_path, restart, named):
    check_and_record(str(tmp_path), True, BY_GROUP)
    with pytest.raises(CheckpointSettingsChanged, match="start a new --checkpoint") as refused:
        check_and_record(str(tmp_path), False, restart)
    assert named in str(refused.value)
    assert json.loads((tmp_path / FILE).read_text()) == BY_GROUP  # the record stays the checkpoint's


def test_keyed_by_partition_the_partition_count_is_part_of_the_key(tmp_path):
    check_and_record(str(tmp_path), True, BY_PARTITION)
    with pytest.raises(CheckpointSettingsChanged, match="offsets.topic.num.partitions 50 -> 12"):
        check_and_record(str(tmp_path), False, job_settings("coordinator-partition", "processing", 12))


def test_a_checkpoint_with_no_batch_yet_or_from_before_the_record_takes_this_starts_settings(tmp_path):
    check_and_record(str(tmp_path), True, BY_GROUP)
    check_and_record(str(tmp_path), True, BY_PARTITION)  # a start that never planned a batch: its state is empty
    assert json.loads((tmp_path / FILE).read_text()) == BY_PARTITION
    older = tmp_path / "older"
    check_and_record(str(older), False, BY_GROUP)  # written before this file existed
    assert json.loads((older / FILE).read_text()) == BY_GROUP


def test_run_refuses_another_keying_before_spark_starts(tmp_path, capsys):
    checkpoint = tmp_path / "checkpoint"
    (checkpoint / "query" / "offsets").mkdir(parents=True)
    (checkpoint / "query" / "offsets" / "0").write_text("v1\n")  # a micro-batch was planned here
    check_and_record(str(checkpoint), True, BY_GROUP)
    # No broker at this address and no Spark: the refusal comes first.
    code = main(
        [
            "run",
            "--bootstrap",
            "127.0.0.1:9",
            "--checkpoint",
            str(checkpoint),
            "--state-key",
            "coordinator-partition",
            "--store",
            "",
        ]
    )
    assert code == 2
    assert "state_key 'group' -> 'coordinator-partition'" in capsys.readouterr().err
