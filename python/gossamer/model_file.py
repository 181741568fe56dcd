"""Reading Gossamer's model file (docs/formats/model-file.md) in pure Python: OUT/model.bin of
`gossamer train` or of a job's peers, and checkpoints, which share the format.

    m = gossamer.load_model("out/train/model.bin")
    m.params            # the flat float32 parameters (a NumPy array; array.array without NumPy)
    m.layout            # [(partition, offset, size)], covering the parameters once
    m.model, m.step     # "softmax 20-2 (42 parameters)", training steps taken

The checks and their one-line messages are those of `gossamer eval` (ConfigError).
"""

import os
import struct
import zlib
from typing import NamedTuple

try:
    from ._native import ConfigError
except ImportError:  # the module on its own, without the compiled part

    class ConfigError(ValueError):
        """A bad input file (gossamer.ConfigError when the package is whole)."""


MAGIC = b"GSMRMODL"
VERSION = 1

__all__ = ["ModelFile", "load_model", "MAGIC", "VERSION"]


class ModelFile(NamedTuple):
    model: str      # the model's description, e.g. "mlp 784-256-128-10 (235146 parameters)"
    step: int       # training steps taken when it was written
    layout: list    # [(name, offset, size)] in parameter order
    params: object  # float32 values: numpy.ndarray, or array.array("f") without NumPy


class _Reader:
    def __init__(self, path, data):
        self.path, self.data, self.pos = path, data, 0

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            raise ConfigError(f"{self.path}: truncated model file (while reading {what}); "
                              "the file is incomplete; write it again")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def get(self, fmt, what):
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what):
        n = self.get("I", what)
        return self.take(n, what).decode("utf-8", errors="replace")


def _floats(raw):
    try:
        import numpy
        return numpy.frombuffer(raw, dtype="<f4").copy()
    except ImportError:
        import array
        out = array.array("f")
        out.frombytes(raw)
        return out


def load_model(path):
    """Reads and checks a model file; returns a ModelFile. Raises ConfigError (one line naming
    the file) for a missing file, a folder, a wrong magic number or version, a truncated file,
    trailing bytes, a checksum mismatch or an invalid layout."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a folder, not a model file; give the file itself, e.g. "
                          "OUT/model.bin or OUT/checkpoint-STEP.bin")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(f"{path}: cannot open model file: {e.strerror}; check the path and its permissions") from None
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        raise ConfigError(f"{path}: not a Gossamer model file (bad magic number); give a file "
                          "written by gossamer train")
    r = _Reader(path, data)
    r.take(len(MAGIC), "magic")
    version = r.get("I", "version")
    if version != VERSION:
        raise ConfigError(f"{path}: model file version {version} is not supported (this build "
                          f"reads {VERSION}); use a matching gossamer version")
    step = r.get("q", "step")
    model = r.string("model description")
    count = r.get("Q", "parameter count")
    parts = r.get("I", "partition count")
    layout = []
    for _ in range(parts):
        name = r.string("partition name")
        offset = r.get("Q", "partition offset")
        size = r.get("Q", "partition size")
        layout.append((name, offset, size))
    if count > len(data) // 4:
        raise ConfigError(f"{path}: truncated model file (while reading parameters); the file "
                          "is incomplete; write it again")
    raw = r.take(count * 4, "parameters")
    covered = r.pos
    stored = r.get("I", "checksum")
    if r.pos != len(data):
        raise ConfigError(f"{path}: trailing bytes after the checksum; the file is corrupt")
    if zlib.crc32(data[:covered]) & 0xFFFFFFFF != stored:
        raise ConfigError(f"{path}: checksum mismatch: the file is corrupt; write it again or "
                          "use another copy")
    end = 0
    for name, offset, size in sorted(layout, key=lambda p: p[1]):
        if offset != end or size == 0:
            raise ConfigError(f"{path}: invalid partition layout: partition {name!r} at "
                              f"[{offset}, {offset + size}) does not follow the one before "
                              f"(which ends at {end}); the file is corrupt")
        end = offset + size
    if end != count:
        raise ConfigError(f"{path}: invalid partition layout: the partitions cover {end} of "
                          f"{count} parameters; the file is corrupt")
    return ModelFile(model, step, layout, _floats(raw))
