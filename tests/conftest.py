"""Suite-wide test settings."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

# CI machines are small and shared: a parser example that takes 300 ms under load is not a failure.
# Property tests assert behaviour (never raises, right kind), not speed; speed lives in bench/.
settings.register_profile("nightowl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("nightowl")
