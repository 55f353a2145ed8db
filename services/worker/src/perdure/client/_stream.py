"""Frames of a run's output streams as a client reads them, and StreamText: the text a reader
shows, rebuilt per step with every RESET applied (docs/guarantees.md, "Live results and
streams")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.worker._payload import from_payload


@dataclass(frozen=True)
class Frame:
    """One frame: `seq` (1, 2, 3... per run and stream), the `step_id` and `attempt` that
    emitted it, and `data` (the chunk, decoded); a reset frame has `reset` set and no data."""

    seq: int
    stream: str
    step_id: str
    attempt: int
    reset: bool
    data: Any
    time: datetime

    @classmethod
    def of(cls, frame: wf.StreamFrame) -> Frame:
        reset = frame.kind == wf.FRAME_KIND_RESET
        return cls(
            seq=frame.seq,
            stream=frame.stream,
            step_id=frame.step_id,
            attempt=frame.attempt,
            reset=reset,
            data=None if reset else from_payload(frame.data),
            time=frame.time.ToDatetime(),
        )


@dataclass
class StreamText:
    """The text of a stream as a reader renders it: per step, the chunks since its last reset
    (a failed attempt's text is dropped, never shown twice or mixed with its retry's); steps
    in the order their first frame came. Feed it every frame, in order, with add()."""

    chunks: dict[str, list[str]] = field(default_factory=dict)
    resets: list[Frame] = field(default_factory=list)
    last_seq: int = 0

    def add(self, frame: Frame) -> None:
        """Apply one frame (frames already applied, by seq, are ignored)."""
        if frame.seq <= self.last_seq:
            return
        self.last_seq = frame.seq
        if frame.reset:
            self.chunks[frame.step_id] = []
            self.resets.append(frame)
            return
        data = frame.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        self.chunks.setdefault(frame.step_id, []).append(text)

    def step(self, step_id: str) -> str:
        """One step's text."""
        return "".join(self.chunks.get(step_id, ()))

    @property
    def text(self) -> str:
        """Every step's text, one after another."""
        return "".join(self.step(step_id) for step_id in self.chunks)
