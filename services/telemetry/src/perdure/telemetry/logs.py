"""One structured log format for every Perdure process, joined to traces.

Every line emitted inside a span carries its trace_id and span_id. PERDURE_LOG_FORMAT=json
writes one JSON object per line (for log pipelines); the default is readable text with the
same fields as key=value pairs at the end.
"""

from __future__ import annotations

import json
import logging
import os

from opentelemetry import trace


class _TraceFormatter(logging.Formatter):
    """Text lines: time level service logger: message [trace_id=… span_id=…]."""

    def __init__(self, service: str, as_json: bool) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s")
        self._service = service
        self._json = as_json

    def format(self, record: logging.LogRecord) -> str:
        span = trace.get_current_span().get_span_context()
        ids = (
            {
                "trace_id": trace.format_trace_id(span.trace_id),
                "span_id": trace.format_span_id(span.span_id),
            }
            if span.is_valid
            else {}
        )
        if not self._json:
            line = super().format(record)
            return line + "".join(f" {key}={value}" for key, value in ids.items())
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "service": self._service,
            "logger": record.name,
            "message": record.getMessage(),
            **ids,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(service: str) -> None:
    """Log to stderr at PERDURE_LOG_LEVEL (default INFO) in PERDURE_LOG_FORMAT (text|json)."""
    log_format = os.environ.get("PERDURE_LOG_FORMAT", "text").strip().lower()
    if log_format not in ("text", "json"):
        raise SystemExit(f"PERDURE_LOG_FORMAT: {log_format!r} is not text or json")
    handler = logging.StreamHandler()
    handler.setFormatter(_TraceFormatter(service, as_json=log_format == "json"))
    logging.basicConfig(
        level=os.environ.get("PERDURE_LOG_LEVEL", "INFO").upper(), handlers=[handler]
    )
