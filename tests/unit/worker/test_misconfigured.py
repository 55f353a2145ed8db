"""Which host name a worker checks before connecting, per gRPC target form."""

from __future__ import annotations

import pytest

from perdure.worker._errors import WorkerConfigurationError
from perdure.worker._misconfigured import check_resolves, host_of


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("localhost:7402", "localhost"),
        ("scheduler.perdure.svc", "scheduler.perdure.svc"),
        ("dns:///scheduler:7402", "scheduler"),
        ("dns://10.0.0.2/scheduler:7402", "scheduler"),
        ("[::1]:7402", "::1"),
        ("ipv4:127.0.0.1:7402,127.0.0.1:7403", None),
        ("unix:/run/perdure.sock", None),
    ],
)
def test_the_host_a_target_resolves(address: str, host: str | None) -> None:
    assert host_of(address) == host


async def test_a_name_that_does_not_exist_is_a_configuration_error() -> None:
    with pytest.raises(WorkerConfigurationError, match="does not resolve"):
        await check_resolves("scheduler.perdure.invalid:7402", "scheduler")
    await check_resolves("127.0.0.1:7402", "scheduler")  # an address: nothing to resolve
