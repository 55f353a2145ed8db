"""The `perdure` command: run a service, a local cluster, or talk to the API."""
