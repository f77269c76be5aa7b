"""aiokafka's fetch request and response (v11) encoded and decoded in one pass each, with `struct`.

aiokafka encodes and decodes every field of a request through nested schema objects, a Python call a
field. It keeps no fetch session, so every fetch names every partition its consumer is assigned and every
answer lists them all, records or none: a worker's consumer holds some 24 partitions, and at 1,000 turn
events a second its fetches, a few records each, spent a fifth of the worker's CPU in that codec
(docs/decisions/0031-fetch-codec-in-one-pass.md). These give the same values as aiokafka's own
(tests/unit/test_kafka_codec.py) for v11, the newest version aiokafka speaks and the one Kafka answers it in.

Upstream: no issue reports it; the decode is `aiokafka.conn.AIOKafkaConnection._handle_frame` through
`aiokafka.protocol.types.Schema.decode` (aiokafka 0.14.0), with a compiled path only for record batches.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

from aiokafka.protocol.fetch import FetchRequest_v11, FetchResponse_v11

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# throttle_time_ms, error_code, session_id, and the number of topics.
_RESPONSE_HEAD = struct.Struct(">ihii")
# partition, error_code, highwater_offset, last_stable_offset, log_start_offset, aborted transactions' count.
_PARTITION_HEAD = struct.Struct(">ihqqqi")
# producer_id, first_offset.
_ABORTED = struct.Struct(">qq")
# preferred_read_replica, and the message set's length.
_PARTITION_TAIL = struct.Struct(">ii")
# replica_id, max_wait_time, min_bytes, max_bytes, isolation_level, session_id, session_epoch, topics' count.
_REQUEST_HEAD = struct.Struct(">iiiibiii")
# partition, current_leader_epoch, fetch_offset, log_start_offset, max_bytes.
_REQUEST_PARTITION = struct.Struct(">iiqqi")


def encode_fetch_request(request: FetchRequest_v11) -> bytes:
    """`FetchRequest_v11.encode`: the bytes aiokafka's schema would write."""
    fields = request.__dict__
    topics = fields["topics"]
    out = [
        _REQUEST_HEAD.pack(
            fields["replica_id"],
            fields["max_wait_time"],
            fields["min_bytes"],
            fields["max_bytes"],
            fields["isolation_level"],
            fields["session_id"],
            fields["session_epoch"],
            len(topics),
        )
    ]
    for topic, partitions in topics:
        out.append(_string(topic))
        out.append(_INT32.pack(len(partitions)))
        out.extend(_REQUEST_PARTITION.pack(*partition) for partition in partitions)
    forgotten = fields["forgotten_topics_data"]
    if forgotten is None:
        out.append(_INT32.pack(-1))
    else:
        out.append(_INT32.pack(len(forgotten)))
        for topic, numbers in forgotten:
            out.append(_string(topic))
            out.append(_INT32.pack(len(numbers)))
            out.extend(_INT32.pack(number) for number in numbers)
    out.append(_string(fields["rack_id"]))
    return b"".join(out)


def decode_fetch_response(data: BytesIO | bytes) -> FetchResponse_v11:
    """`FetchResponse_v11.decode`: the values aiokafka's schema would read, lists and tuples alike."""
    stream = BytesIO(data) if isinstance(data, bytes) else data
    start = stream.tell()
    with stream.getbuffer() as view:
        values, end = _response(view, start)
    stream.seek(end)
    return FetchResponse_v11(*values)


def _response(view: memoryview, pos: int) -> tuple[tuple[Any, ...], int]:
    throttle, error, session, topic_count = _RESPONSE_HEAD.unpack_from(view, pos)
    pos += _RESPONSE_HEAD.size
    topics: list[tuple[str | None, list[tuple[Any, ...]]]] = []
    for _ in range(topic_count):
        topic, pos = _read_string(view, pos)
        (partition_count,) = _INT32.unpack_from(view, pos)
        pos += 4
        partitions = []
        for _ in range(partition_count):
            partition, part_error, highwater, stable, log_start, aborted_count = _PARTITION_HEAD.unpack_from(view, pos)
            pos += _PARTITION_HEAD.size
            aborted: list[tuple[int, int]] | None = None
            if aborted_count >= 0:
                aborted = []
                for _ in range(aborted_count):
                    aborted.append(_ABORTED.unpack_from(view, pos))
                    pos += _ABORTED.size
            replica, size = _PARTITION_TAIL.unpack_from(view, pos)
            pos += _PARTITION_TAIL.size
            records = None
            if size >= 0:
                records = bytes(view[pos : pos + size])
                if len(records) != size:
                    raise ValueError("a fetch response ended inside a partition's records")
                pos += size
            partitions.append((partition, part_error, highwater, stable, log_start, aborted, replica, records))
        topics.append((topic, partitions))
    return (throttle, error, session, topics), pos


def _string(value: str | None) -> bytes:
    if value is None:
        return _INT16.pack(-1)
    encoded = value.encode()
    return _INT16.pack(len(encoded)) + encoded


def _read_string(view: memoryview, pos: int) -> tuple[str | None, int]:
    (length,) = _INT16.unpack_from(view, pos)
    pos += 2
    if length < 0:
        return None, pos
    return bytes(view[pos : pos + length]).decode(), pos + length


def install() -> None:
    """Every fetch this process makes from now on goes through these codecs."""
    FetchRequest_v11.encode = encode_fetch_request
    FetchResponse_v11.decode = staticmethod(decode_fetch_response)
