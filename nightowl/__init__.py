"""nightowl: incident runbooks for GPU servers and LLM-serving fleets."""

__version__ = "0.1.0"
