"""Reading a GGUF file (llama.cpp's model format) into NumPy: metadata, tensors, dequantization.

A GGUF file is a header of key/value metadata (architecture, sizes, the tokenizer's vocabulary and
merges), a table of tensors (name, shape, type, offset) and the tensors' bytes. The quantized types
store blocks of 32 weights with one or two float16 numbers per block:

- ``Q8_0``: 34 bytes per block, a scale ``d`` and 32 int8 ``q``; ``w = d·q``.
- ``Q4_0``: 18 bytes, ``d`` and 32 four-bit ``q`` (two per byte); ``w = d·(q - 8)``.
- ``Q4_1``: 20 bytes, ``d``, a minimum ``m`` and 32 four-bit ``q``; ``w = d·q + m``.

In a four-bit block, byte ``j`` holds weight ``j`` in its low half and weight ``j + 16`` in its high
half. The reader here is a few vectorised NumPy lines per type; the ``gguf`` package (the reference
reader of llama.cpp) reads the same file, and the tests compare the two. This one exists because it
opens the course's model in well under a second, where a general reader parses every one of the
49,152 vocabulary strings into its own array first.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

__all__ = ["GGUFError", "GGUFFile", "dequantize", "read_gguf"]

MAGIC = b"GGUF"

# ggml tensor types this reader understands: name, weights per block, bytes per block.
TENSOR_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
                8: ("Q8_0", 32, 34)}

# Names of some other ggml types, for the error message.
_OTHER_TYPES = {6: "Q5_0", 7: "Q5_1", 9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K",
                14: "Q6_K", 15: "Q8_K", 30: "BF16"}

# Metadata value types: struct code of the scalar types, then string (8) and array (9).
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF file this reader can read; the message says why."""


@dataclass
class TensorInfo:
    """Where one tensor lies in the file: its name, shape, ggml type and byte offset."""

    name: str
    shape: tuple[int, ...]        # NumPy order: the last axis is GGUF's first (the row length)
    type_id: int
    offset: int                   # from the start of the data section

    @property
    def type_name(self) -> str:
        """The tensor's ggml type by name (``Q4_1``, ``F32``), or ``ggml type N`` for one without a name."""
        if self.type_id in TENSOR_TYPES:
            return TENSOR_TYPES[self.type_id][0]
        return _OTHER_TYPES.get(self.type_id, f"ggml type {self.type_id}")


class _Cursor:
    def __init__(self, buf: memoryview, path: str):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, fmt: str):
        try:
            (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error:
            raise GGUFError(f"{self.path}: the file ends in the middle of its header "
                            "(truncated or not a GGUF file)") from None
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise GGUFError(f"{self.path}: a string of the header runs past the end of the file")
        s = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8", errors="replace")
        self.pos += n
        return s

    def _strings(self, n: int) -> list[str]:
        # one tight loop: a vocabulary holds tens of thousands of short strings
        out, buf, pos, end = [], self.buf, self.pos, len(self.buf)
        unpack, append = struct.Struct("<Q").unpack_from, out.append
        try:
            for _ in range(n):
                (size,) = unpack(buf, pos)
                pos += 8
                if pos + size > end:
                    raise struct.error
                append(str(buf[pos:pos + size], "utf-8", "replace"))
                pos += size
        except struct.error:
            raise GGUFError(f"{self.path}: the file ends in the middle of its header "
                            "(truncated or not a GGUF file)") from None
        self.pos = pos
        return out

    def value(self, type_id: int):
        if type_id in _SCALARS:
            return self.take(_SCALARS[type_id])
        if type_id == _STRING:
            return self.string()
        if type_id == _ARRAY:
            item_type, n = self.take("<I"), self.take("<Q")
            if item_type == _STRING:
                return self._strings(n)
            if item_type in _SCALARS:
                dt = np.dtype(_SCALARS[item_type])
                arr = np.frombuffer(self.buf, dt, count=n, offset=self.pos).copy()
                self.pos += n * dt.itemsize
                return arr
            return [self.value(item_type) for _ in range(n)]
        raise GGUFError(f"{self.path}: unknown metadata value type {type_id}")


class GGUFFile:
    """An open GGUF file: ``metadata`` (dict), ``tensors`` (dict name -> TensorInfo), ``array(name)``.

    The bytes are memory-mapped: nothing is copied until a tensor is dequantized.
    """

    def __init__(self, path):
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no file at {path!r}")
        with open(path, "rb") as f:
            head = f.read(4)
        if head != MAGIC:
            raise GGUFError(f"{path} is not a GGUF file: it starts with {head!r}, not {MAGIC!r}")
        self.path = path
        self._data = np.memmap(path, dtype=np.uint8, mode="r")
        cur = _Cursor(memoryview(self._data), path)
        cur.pos = 4
        self.version = cur.take("<I")
        if self.version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {self.version}; this reader reads versions 2 and 3")
        n_tensors, n_kv = cur.take("<Q"), cur.take("<Q")
        self.metadata: dict = {}
        for _ in range(n_kv):
            key = cur.string()
            self.metadata[key] = cur.value(cur.take("<I"))
        self.tensors: dict[str, TensorInfo] = {}
        for _ in range(n_tensors):
            name = cur.string()
            dims = [cur.take("<Q") for _ in range(cur.take("<I"))]
            type_id, offset = cur.take("<I"), cur.take("<Q")
            self.tensors[name] = TensorInfo(name, tuple(reversed(dims)), type_id, offset)
        align = int(self.metadata.get("general.alignment", 32))
        self._start = (cur.pos + align - 1) // align * align

    def raw(self, name: str) -> np.ndarray:
        """The stored bytes of tensor ``name`` (a read-only uint8 view, no copy)."""
        info = self._info(name)
        _, per_block, block_bytes = TENSOR_TYPES[info.type_id]
        n = int(np.prod(info.shape))
        size = n // per_block * block_bytes
        begin = self._start + info.offset
        if begin + size > self._data.size:
            raise GGUFError(f"{self.path}: tensor {name!r} runs past the end of the file (truncated?)")
        return self._data[begin:begin + size]

    def array(self, name: str, dtype=np.float32) -> np.ndarray:
        """Tensor ``name`` dequantized, shape as in NumPy (rows = GGUF's second axis)."""
        info = self._info(name)
        return dequantize(self.raw(name), info.type_id, info.shape, dtype)

    def _info(self, name: str) -> TensorInfo:
        if name not in self.tensors:
            raise KeyError(f"{self.path} has no tensor {name!r}")
        info = self.tensors[name]
        if info.type_id not in TENSOR_TYPES:
            supported = ", ".join(t[0] for t in TENSOR_TYPES.values())
            raise GGUFError(f"tensor {name!r} is stored as {info.type_name}; this reader supports "
                            f"{supported}")
        return info


def read_gguf(path) -> GGUFFile:
    """Open a GGUF file (see :class:`GGUFFile`)."""
    return GGUFFile(path)


def dequantize(raw, type_id: int, shape, dtype=np.float32) -> np.ndarray:
    """Weights from the stored bytes of one tensor.

    Parameters
    ----------
    raw : ndarray of uint8, shape (n_bytes,)
    type_id : int
        The ggml type (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0).
    shape : tuple of int
        NumPy shape of the result; its last axis is a multiple of 32 for the block types.

    Returns
    -------
    ndarray, shape ``shape``, dtype ``dtype``
    """
    if type_id not in TENSOR_TYPES:
        supported = ", ".join(f"{k} ({v[0]})" for k, v in TENSOR_TYPES.items())
        raise GGUFError(f"tensor type {type_id} is not supported; supported: {supported}")
    name, _, block_bytes = TENSOR_TYPES[type_id]
    raw = np.asarray(raw, dtype=np.uint8)
    if name == "F32":
        return raw.view(np.float32).reshape(shape).astype(dtype)
    if name == "F16":
        return raw.view(np.float16).reshape(shape).astype(dtype)
    blocks = raw.reshape(-1, block_bytes)
    d = blocks[:, 0:2].copy().view(np.float16).astype(dtype)                 # (n_blocks, 1)
    if name == "Q8_0":
        q = blocks[:, 2:].view(np.int8)                                         # (n_blocks, 32)
        out = np.multiply(q, d, dtype=dtype)
    else:
        packed = blocks[:, 4:] if name == "Q4_1" else blocks[:, 2:]             # (n_blocks, 16)
        out = np.empty((blocks.shape[0], 32), dtype)
        # low halves are weights 0..15 of the block, high halves weights 16..31
        np.multiply(packed & 0x0F, d, out=out[:, :16], dtype=dtype)
        np.multiply(packed >> 4, d, out=out[:, 16:], dtype=dtype)
        if name == "Q4_1":
            out += blocks[:, 2:4].copy().view(np.float16).astype(dtype)
        else:
            out -= 8 * d
    return out.reshape(shape)
