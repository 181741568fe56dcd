"""JSON that is always valid (RFC 8259 has no NaN or infinities): what the experiment scripts
write. A non-finite float becomes null instead of the bare NaN that json.dumps writes."""

import json


def strict(value):
    """The value with NaN and infinities as None, in dicts, lists and tuples too."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    return [strict(v) for v in value] if isinstance(value, (list, tuple)) else value


def dumps(value, **kwargs):
    """json.dumps of strict(value), refusing anything non-finite that is left."""
    return json.dumps(strict(value), allow_nan=False, **kwargs)
