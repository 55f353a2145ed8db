"""OpenTelemetry for Perdure's processes.

`telemetry_for(service)` configures traces, metrics and logs from the standard OTEL_*
variables (nothing is exported, and nothing runs, unless they ask for it); `rpc` gives gRPC
servers and channels their spans; `propagation` carries a workflow's trace context.
"""

from perdure.telemetry.logs import configure_logging
from perdure.telemetry.setup import Telemetry, telemetry_for, tracing_enabled

__all__ = ["Telemetry", "configure_logging", "telemetry_for", "tracing_enabled"]
