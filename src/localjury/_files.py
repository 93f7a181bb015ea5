"""Small file helpers shared by the registry and the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from localjury.errors import ConfigError


def read_yaml(path: Path, what: str) -> Any:
    """Parse a YAML file, or raise a ConfigError naming ``what`` it is and the path.

    Raises:
        ConfigError: The file does not exist or is not valid YAML.
    """
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {exc}") from exc
