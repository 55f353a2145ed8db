"""Histogram buckets shared by every process's duration instruments."""

# Durations in seconds, from a millisecond to a minute (the SDK's default buckets are meant for
# milliseconds).
DURATION_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
