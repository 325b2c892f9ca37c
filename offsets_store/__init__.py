"""``__consumer_offsets``-compatible records: the byte-exact codec, the group -> partition rule, and a compacted
store with an embedded (SQLite) and a Kafka (compacted topic) backend."""

from offsets_store.codec import CodecError, decode_record, encode_record
from offsets_store.factory import open_store
from offsets_store.partitioning import partition_for
from offsets_store.store import STORE_TYPES, Store

__all__ = ["CodecError", "decode_record", "encode_record", "partition_for", "STORE_TYPES", "Store", "open_store"]
