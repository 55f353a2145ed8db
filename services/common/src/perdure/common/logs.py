"""One log format for every Perdure process."""

import logging
import os


def configure_logging(component: str) -> None:
    """Log to stderr at PERDURE_LOG_LEVEL (default INFO), each line tagged with the component."""
    logging.basicConfig(
        level=os.environ.get("PERDURE_LOG_LEVEL", "INFO").upper(),
        format=f"%(asctime)s %(levelname)s {component} %(name)s: %(message)s",
    )
