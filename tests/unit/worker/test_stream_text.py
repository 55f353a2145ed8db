"""StreamText renders a stream as a reader shows it: a reset drops the failed attempt's text
of that step only, and a frame seen twice is applied once."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from perdure.client import Frame, StreamText

NOW = datetime.now(UTC)


def frame(seq: int, step: str, attempt: int, data: Any = None, reset: bool = False) -> Frame:
    return Frame(seq, "output", step, attempt, reset, data, NOW)


def test_a_reset_drops_the_failed_attempts_text_of_its_step_alone() -> None:
    text = StreamText()
    frames = [
        frame(1, "plan", 1, "Plan. "),
        frame(2, "analyze", 1, "The ans"),
        frame(3, "analyze", 1, reset=True),
        frame(4, "analyze", 2, "The answer"),
        frame(5, "analyze", 2, {"n": 1}),
    ]
    for each in frames + frames[:3]:  # a resumed reader that saw some again applies them once
        text.add(each)
    assert text.text == 'Plan. The answer{"n": 1}'
    assert text.step("analyze") == 'The answer{"n": 1}'
    assert [(r.step_id, r.attempt) for r in text.resets] == [("analyze", 1)]
    assert text.last_seq == 5
