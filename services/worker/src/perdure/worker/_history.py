"""A run's saved history: its WorkflowInfo and its journal's events, as the public API gives
them, and the file format the replay gate reads (`perdure workflow history ID --json` writes
it): one JSON object, {"workflow": WorkflowInfo, "events": [HistoryEvent, ...]}, each message
in the protobuf JSON mapping, payloads inline (base64 `data`, exactly the bytes recorded)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from perdure.api.workflow.v1 import workflow_pb2 as wf


@dataclass(frozen=True)
class History:
    """One run: what it is (type, input, status...) and everything its journal recorded."""

    workflow: wf.WorkflowInfo
    events: list[wf.HistoryEvent]

    def to_json(self) -> dict[str, Any]:
        """The file format's object."""
        return {
            "workflow": json_format.MessageToDict(self.workflow),
            "events": [json_format.MessageToDict(event) for event in self.events],
        }

    def dumps(self) -> str:
        """The file's text: one event per line, so that saved histories diff well."""
        data = self.to_json()
        workflow = json.dumps(data["workflow"], sort_keys=True)
        events = ",\n  ".join(json.dumps(event, sort_keys=True) for event in data["events"])
        return f'{{"workflow": {workflow},\n "events": [\n  {events}\n]}}\n'

    @classmethod
    def from_json(cls, data: Any) -> History:
        """A history from the file format's object; ValueError saying what does not fit."""
        if not isinstance(data, dict) or not isinstance(data.get("events"), list):
            raise ValueError(
                'a saved history is a JSON object {"workflow": {...}, "events": [...]}, as '
                "`perdure workflow history ID --json` writes it"
            )
        try:
            workflow = json_format.ParseDict(data.get("workflow") or {}, wf.WorkflowInfo())
            events = [json_format.ParseDict(event, wf.HistoryEvent()) for event in data["events"]]
        except json_format.ParseError as error:
            raise ValueError(f"not a saved history: {error}") from None
        if not workflow.workflow_type:
            raise ValueError("the saved history's workflow has no workflowType")
        return cls(workflow, events)

    @classmethod
    def read(cls, path: str | Path) -> History:
        """A history file; ValueError naming the file when it cannot be read as one."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls.from_json(data)
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: {error}") from None

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.dumps(), encoding="utf-8")
