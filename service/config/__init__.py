"""Configuration: rag.properties -> one typed, immutable Settings object, hot reloaded."""

from service.config.settings import Settings
from service.config.store import (
    ConfigConflict,
    ConfigError,
    ConfigStore,
    load_settings,
    settings_from_mapping,
)

__all__ = [
    "ConfigConflict",
    "ConfigError",
    "ConfigStore",
    "Settings",
    "load_settings",
    "settings_from_mapping",
]
