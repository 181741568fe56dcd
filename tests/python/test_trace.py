"""gossamer.Peer(..., trace=PATH) writes the peer's timeline (docs/formats/trace.md, docs/library/python.md)."""

import json

import numpy as np
import pytest

import gossamer
from conftest import run_threads


def test_each_peer_writes_its_timeline(ring4, tmp_path):
    n, steps = 4, 12
    job = gossamer.InprocJob(n)

    def peer(rank):
        x = np.zeros(10, np.float32)
        p = gossamer.Peer(x, ring4, rank=rank, algorithm="dpsgd", steps=steps,
                          transport="inproc", job=job, join_timeout=20, step_timeout=20,
                          stall_timeout=20, run_timeout=60,
                          trace=str(tmp_path / f"peer{rank}.trace.json"))
        while p.step(1.0):
            x += 0.01 * (rank + 1)
        return p.finish()

    results, errors = run_threads(n, peer)
    assert errors == [None] * n
    for rank in range(n):
        doc = json.loads((tmp_path / f"peer{rank}.trace.json").read_text())
        events = doc["traceEvents"]
        other = doc["otherData"]
        assert other["rank"] == rank
        assert other["clock"] == "steady"
        # Threads of one process read one clock: offset and residual 0, nothing measured.
        assert other["clock_offset"] == {"offset_us": 0.0, "residual_us": 0.0, "round_trips": 0}
        names = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
        assert names == [f"peer {rank}"]
        step_events = [e for e in events if e.get("cat") == "step"]
        assert len(step_events) == results[rank]["steps"] == steps
        assert all(e["pid"] == rank for e in step_events)
        # On a ring each peer sends to and receives from its 2 neighbours.
        sent_to = {e["args"]["to"] for e in events if e.get("cat") == "send"}
        assert sent_to == {(rank + 1) % n, (rank - 1) % n}
        assert any(e.get("cat") == "wait" for e in events)


def test_a_trace_path_that_cannot_be_written_is_refused_at_once(ring4, tmp_path):
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Peer(np.zeros(10, np.float32), ring4, rank=0, steps=5, transport="inproc",
                      job=gossamer.InprocJob(4), trace=str(tmp_path))
    assert str(e.value).startswith("PeerOptions::trace_path: ")
    assert "is a folder, not a file name" in str(e.value)
    with pytest.raises(gossamer.ConfigError) as e:
        gossamer.Peer(np.zeros(10, np.float32), ring4, rank=0, steps=5, transport="inproc",
                      job=gossamer.InprocJob(4), trace=str(tmp_path / "t.json"), trace_limit=10)
    assert str(e.value).startswith("PeerOptions::trace_limit: 10 bytes is too small")
