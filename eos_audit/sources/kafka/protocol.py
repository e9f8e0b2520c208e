"""Kafka's protocol primitives, read from bytes: what the generated `*Data.read` methods read.

Big-endian fixed-width integers, strings with an int16 length (-1 = null), arrays with an int32
length, and for flexible versions (KIP-482) compact strings, arrays and bytes whose unsigned varint
length is N + 1 (0 = null) and the tagged-field section that ends every struct. The record framing
of a v2 batch uses zig-zag varints instead (`read_varint`, `read_varlong`), as
`org.apache.kafka.common.utils.ByteUtils` does.

Everything is bounds-checked: bytes that end early or carry an impossible length raise
`ProtocolFormatError` with a reason, never an IndexError and never a silent default, because the
caller quarantines the record with that reason.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UUID_BYTES = 16


class ProtocolFormatError(ValueError):
    """Bytes that do not follow Kafka's protocol encoding; `reason` says where and why.

    Not an `EosAuditError`: one record that does not decode is a quarantine row, not a failed run.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProtocolReader:
    """A cursor over one message's bytes that reads Kafka's primitives in order."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str = "message") -> None:
        self._data = bytes(data)
        self._at = 0
        self._what = what

    @property
    def position(self) -> int:
        """How many bytes have been read."""
        return self._at

    @property
    def remaining(self) -> int:
        """How many bytes are left."""
        return len(self._data) - self._at

    def _take(self, size: int, field: str) -> bytes:
        if size < 0:
            raise ProtocolFormatError(f"{self._what}: negative length {size} for {field}")
        if size > self.remaining:
            raise ProtocolFormatError(
                f"{self._what}: {field} needs {size} bytes at byte {self._at}, "
                f"only {self.remaining} left (truncated)"
            )
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def int8(self, field: str = "int8") -> int:
        """A signed byte."""
        return int.from_bytes(self._take(1, field), "big", signed=True)

    def int16(self, field: str = "int16") -> int:
        """A big-endian int16."""
        return _INT16.unpack(self._take(2, field))[0]

    def int32(self, field: str = "int32") -> int:
        """A big-endian int32."""
        return _INT32.unpack(self._take(4, field))[0]

    def int64(self, field: str = "int64") -> int:
        """A big-endian int64."""
        return _INT64.unpack(self._take(8, field))[0]

    def uuid(self, field: str = "uuid") -> str | None:
        """A Uuid (16 bytes), as Kafka prints it; None for the all-zero `Uuid.ZERO_UUID`.

        Kafka's `Uuid.toString` is the URL-safe base64 of the 16 bytes without padding, which is
        also what `kafka-dump-log.sh` prints in its JSON.
        """
        raw = self._take(_UUID_BYTES, field)
        if raw == bytes(_UUID_BYTES):
            return None
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    def unsigned_varint(self, field: str = "varint") -> int:
        """An unsigned varint of at most 5 bytes (`ByteUtils.readUnsignedVarint`)."""
        value = 0
        for i in range(5):
            byte = self._take(1, field)[0]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value
        raise ProtocolFormatError(f"{self._what}: {field} is a varint longer than 5 bytes")

    def _zigzag(self, max_bytes: int, field: str) -> int:
        raw = 0
        for i in range(max_bytes):
            byte = self._take(1, field)[0]
            raw |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return (raw >> 1) ^ -(raw & 1)
        raise ProtocolFormatError(
            f"{self._what}: {field} is a varint longer than {max_bytes} bytes"
        )

    def varint(self, field: str = "varint") -> int:
        """A zig-zag varint (int32, at most 5 bytes: `ByteUtils.readVarint`)."""
        return self._zigzag(5, field)

    def varlong(self, field: str = "varlong") -> int:
        """A zig-zag varlong (int64, at most 10 bytes: `ByteUtils.readVarlong`)."""
        return self._zigzag(10, field)

    def raw(self, size: int, field: str = "bytes") -> bytes:
        """`size` bytes as they are."""
        return self._take(size, field)

    def _text(self, size: int, field: str) -> str:
        chunk = self._take(size, field)
        try:
            return chunk.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ProtocolFormatError(
                f"{self._what}: {field} is not UTF-8 ({err.reason})"
            ) from None

    def string(self, field: str, *, flexible: bool, nullable: bool = False) -> str | None:
        """A string: int16 length (-1 = null), or compact (unsigned varint N + 1, 0 = null).

        A null where the schema does not allow one is an error, as in the generated readers
        ("non-nullable field ... was serialized as null").
        """
        size = self.unsigned_varint(field) - 1 if flexible else self.int16(field)
        if size == -1:
            if nullable:
                return None
            raise ProtocolFormatError(f"{self._what}: non-nullable {field} was serialized as null")
        return self._text(size, field)

    def bytes_field(self, field: str, *, flexible: bool) -> bytes:
        """A non-nullable bytes field: int32 length, or compact (unsigned varint N + 1)."""
        size = self.unsigned_varint(field) - 1 if flexible else self.int32(field)
        if size == -1:
            raise ProtocolFormatError(f"{self._what}: non-nullable {field} was serialized as null")
        return self._take(size, field)

    def array(
        self,
        read_item: Callable[[ProtocolReader], T],
        field: str,
        *,
        flexible: bool,
        nullable: bool = False,
    ) -> list[T] | None:
        """An array: int32 length (-1 = null), or compact (unsigned varint N + 1, 0 = null).

        Each element costs at least one byte, so a length above the bytes left is rejected
        before anything is allocated for it.
        """
        size = self.unsigned_varint(field) - 1 if flexible else self.int32(field)
        if size == -1:
            if nullable:
                return None
            raise ProtocolFormatError(f"{self._what}: non-nullable {field} was serialized as null")
        if size < 0:
            raise ProtocolFormatError(f"{self._what}: negative length {size} for {field}")
        if size > self.remaining:
            raise ProtocolFormatError(
                f"{self._what}: {field} claims {size} elements with {self.remaining} bytes left"
            )
        return [read_item(self) for _ in range(size)]

    def tagged_fields(self, known: dict[int, Callable[[ProtocolReader], T]]) -> dict[int, T]:
        """The tagged-field section of a flexible struct: the known tags read, the others skipped.

        Each field is tag (unsigned varint), size (unsigned varint) and `size` bytes. A known tag
        is read from exactly its bytes; an unknown one is skipped, as the generated readers keep it
        as a raw field (new tags must be readable by old readers, KIP-482).
        """
        found: dict[int, T] = {}
        count = self.unsigned_varint("tagged field count")
        for _ in range(count):
            tag = self.unsigned_varint("tag")
            size = self.unsigned_varint(f"size of tag {tag}")
            chunk = self._take(size, f"tag {tag}")
            if tag in known:
                inner = ProtocolReader(chunk, f"{self._what} tag {tag}")
                found[tag] = known[tag](inner)
                inner.expect_end()
        return found

    def expect_end(self) -> None:
        """Fail when bytes are left over: the message is longer than its schema says."""
        if self.remaining:
            raise ProtocolFormatError(
                f"{self._what}: {self.remaining} bytes left after the last field "
                f"(read {self._at} of {len(self._data)})"
            )
