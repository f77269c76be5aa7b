"""The fetch codecs against aiokafka's own schema: the same bytes out, the same values in."""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from aiokafka.protocol.fetch import FetchRequest_v11, FetchResponse_v11
from hypothesis import given
from hypothesis import strategies as st

from infra.kafka_codec import decode_fetch_response, encode_fetch_request

int8 = st.integers(-(2**7), 2**7 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.one_of(st.none(), st.text(max_size=12))
aborted = st.one_of(st.none(), st.lists(st.tuples(int64, int64), max_size=3))
records = st.one_of(st.none(), st.binary(max_size=64))
response_partition = st.tuples(int32, int16, int64, int64, int64, aborted, int32, records)
responses = st.tuples(
    int32, int16, int32, st.lists(st.tuples(names, st.lists(response_partition, max_size=5)), max_size=4)
)
request_partition = st.tuples(int32, int32, int64, int64, int32)
requests = st.tuples(
    int32,
    int32,
    int32,
    int32,
    int8,
    int32,
    int32,
    st.lists(st.tuples(names, st.lists(request_partition, max_size=5)), max_size=4),
    st.one_of(st.none(), st.lists(st.tuples(names, st.lists(int32, max_size=3)), max_size=2)),
    names,
)


@given(responses)
def test_a_response_decodes_to_what_aiokafka_reads(values: tuple[Any, ...]) -> None:
    raw = FetchResponse_v11.SCHEMA.encode(values)
    expected = FetchResponse_v11.SCHEMA.decode(BytesIO(raw))
    assert decode_fetch_response(raw).__dict__ == FetchResponse_v11(*expected).__dict__


@given(responses)
def test_a_response_read_from_the_middle_of_a_frame_leaves_the_stream_after_it(values: tuple[Any, ...]) -> None:
    """The connection hands over the frame after its header has been read, as a stream at that point."""
    raw = FetchResponse_v11.SCHEMA.encode(values)
    stream = BytesIO(b"head" + raw + b"tail")
    stream.seek(4)
    decoded = decode_fetch_response(stream)
    assert decoded.__dict__ == FetchResponse_v11(*FetchResponse_v11.SCHEMA.decode(BytesIO(raw))).__dict__
    assert stream.read() == b"tail"


@given(requests)
def test_a_request_encodes_to_the_bytes_aiokafka_writes(values: tuple[Any, ...]) -> None:
    assert encode_fetch_request(FetchRequest_v11(*values)) == FetchRequest_v11.SCHEMA.encode(values)


def test_a_response_cut_inside_its_records_is_refused() -> None:
    raw = FetchResponse_v11.SCHEMA.encode((0, 0, 0, [("t", [(0, 0, 5, 5, 0, None, -1, b"records")])]))
    with pytest.raises(ValueError):
        decode_fetch_response(raw[:-3])
