"""The gateway's HTTP/JSON face: WorkflowService as JSON routes, a live feed of a run's
events (Server-Sent Events), the OpenAPI document and the web UI (docs/http_api.md)."""
