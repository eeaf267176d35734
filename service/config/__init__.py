"""Configuration: rag.properties -> one typed, immutable Settings object, hot reloaded."""

from service.config.settings import Settings
from service.config.store import ConfigStore, load_settings, settings_from_mapping

__all__ = [
    "ConfigStore",
    "Settings",
    "load_settings",
    "settings_from_mapping",
]
