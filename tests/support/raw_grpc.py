"""Unary gRPC calls over a raw HTTP/2 connection, with headers no gRPC client lets a caller send (``grpc-timeout``
with any value): the frames written by hand, the answer's header blocks read with a small HPACK decoder (the
static table, literals, the dynamic table; no Huffman-coded strings, which it refuses rather than misreads)."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20

#: RFC 7541 Appendix A.
STATIC_TABLE: tuple[tuple[str, str], ...] = (
    (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
    (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
    (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
    ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
    ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
    ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""), ("date", ""),
    ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""), ("if-match", ""),
    ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""), ("if-unmodified-since", ""),
    ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""), ("proxy-authenticate", ""),
    ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""), ("retry-after", ""),
    ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""), ("transfer-encoding", ""),
    ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
)  # fmt: skip


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def _literal(name: str, value: str) -> bytes:
    """A literal header field without indexing, with a literal name (RFC 7541 6.2.2), neither string Huffman-coded."""
    return b"\x00" + _string(name.encode()) + _string(value.encode())


def _string(raw: bytes) -> bytes:
    return _integer(len(raw), 7, 0) + raw


def _integer(value: int, prefix: int, first: int) -> bytes:
    limit = (1 << prefix) - 1
    if value < limit:
        return bytes((first | value,))
    out, value = bytearray((first | limit,)), value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


@dataclass
class Decoder:
    """HPACK's decoding side for one connection (its dynamic table lives as long as the connection)."""

    table: list[tuple[str, str]] = field(default_factory=list)

    def _entry(self, index: int) -> tuple[str, str]:
        if index <= len(STATIC_TABLE):
            return STATIC_TABLE[index - 1]
        return self.table[index - len(STATIC_TABLE) - 1]

    @staticmethod
    def _read_integer(block: bytes, at: int, prefix: int) -> tuple[int, int]:
        limit = (1 << prefix) - 1
        value, at = block[at] & limit, at + 1
        if value < limit:
            return value, at
        shift = 0
        while True:
            byte, at = block[at], at + 1
            value += (byte & 127) << shift
            shift += 7
            if not byte & 128:
                return value, at

    def _read_string(self, block: bytes, at: int) -> tuple[str, int]:
        if block[at] & 0x80:
            raise ValueError("a Huffman-coded string: this decoder reads literal strings only")
        length, at = self._read_integer(block, at, 7)
        return block[at : at + length].decode(), at + length

    def decode(self, block: bytes) -> list[tuple[str, str]]:
        fields, at = [], 0
        while at < len(block):
            byte = block[at]
            if byte & 0x80:  # indexed
                index, at = self._read_integer(block, at, 7)
                fields.append(self._entry(index))
                continue
            if byte & 0xE0 == 0x20:  # dynamic table size update
                size, at = self._read_integer(block, at, 5)
                if size == 0:
                    self.table.clear()
                continue
            indexing = bool(byte & 0x40)
            index, at = self._read_integer(block, at, 6 if indexing else 4)
            if index:
                name = self._entry(index)[0]
            else:
                name, at = self._read_string(block, at)
            value, at = self._read_string(block, at)
            if indexing:
                self.table.insert(0, (name, value))
            fields.append((name, value))
        return fields


@dataclass
class Answer:
    """A call's answer: its header fields and trailers as one list, its messages' bytes, and a RST_STREAM's code."""

    headers: list[tuple[str, str]]
    data: bytes
    reset: int | None

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)


class RawChannel:
    """One HTTP/2 connection to a gRPC server on which unary calls go one at a time, on odd stream ids."""

    def __init__(self, address: str, timeout: float = 60.0) -> None:
        host, port = address.rsplit(":", 1)
        self._socket = socket.create_connection((host, int(port)), timeout=timeout)
        self._socket.sendall(PREFACE + _frame(SETTINGS, 0, 0))
        self._buffer = b""
        self._decoder = Decoder()
        self._stream = -1

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> RawChannel:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _read_frame(self) -> tuple[int, int, int, bytes]:
        while True:
            if len(self._buffer) >= 9:
                length = int.from_bytes(self._buffer[:3], "big")
                if len(self._buffer) >= 9 + length:
                    head, payload = self._buffer[:9], self._buffer[9 : 9 + length]
                    self._buffer = self._buffer[9 + length :]
                    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload
            received = self._socket.recv(65536)
            if not received:
                raise ConnectionError("the server closed the connection")
            self._buffer += received

    def call(self, path: str, message: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> Answer:
        """Send ``message`` to ``path`` (``/package.Service/Method``) with ``metadata`` as extra header fields."""
        self._stream += 2
        stream = self._stream
        fields = (
            (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
            ("content-type", "application/grpc"), ("te", "trailers"), *metadata,
        )  # fmt: skip
        block = b"".join(_literal(name, value) for name, value in fields)
        body = b"\x00" + struct.pack(">I", len(message)) + message
        self._socket.sendall(_frame(HEADERS, END_HEADERS, stream, block) + _frame(DATA, END_STREAM, stream, body))
        headers: list[tuple[str, str]] = []
        data, fragment, ended = b"", b"", 0
        while True:
            kind, flags, on, payload = self._read_frame()
            if kind == SETTINGS and not flags & ACK:
                self._socket.sendall(_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                self._socket.sendall(_frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                raise ConnectionError(f"GOAWAY from the server: {payload[8:]!r}")
            elif on != stream:
                continue
            elif kind == RST_STREAM:
                return Answer(headers, data, int.from_bytes(payload, "big"))
            elif kind == DATA:
                data += payload
                if payload:  # give the window back, for the connection and the stream
                    update = struct.pack(">I", len(payload))
                    self._socket.sendall(_frame(WINDOW_UPDATE, 0, 0, update) + _frame(WINDOW_UPDATE, 0, stream, update))
                if flags & END_STREAM:
                    return Answer(headers, data, None)
            elif kind in (HEADERS, CONTINUATION):
                if kind == HEADERS:
                    if flags & PADDED:
                        payload = payload[1 : len(payload) - payload[0]]
                    if flags & PRIORITY:
                        payload = payload[5:]
                    fragment, ended = payload, flags & END_STREAM
                else:
                    fragment += payload
                if flags & END_HEADERS:
                    headers += self._decoder.decode(fragment)
                    if ended:
                        return Answer(headers, data, None)
