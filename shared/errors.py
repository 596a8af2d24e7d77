"""Exceptions with messages that name the problem and the fix."""


class ReplicationError(Exception):
    """Base class of this project's errors."""


class ConfigError(ReplicationError, ValueError):
    """A parameter, profile or name is not one of the valid choices."""


class DataNotFoundError(ReplicationError, FileNotFoundError):
    """A real dataset is not where it was expected."""


class DataFormatError(ReplicationError, ValueError):
    """A data file exists but is not in the expected format."""


def unknown_choice(kind: str, value, valid) -> ConfigError:
    """A ConfigError for ``value`` not among ``valid``, listing the valid choices."""
    valid = sorted(map(str, valid))
    return ConfigError(f"unknown {kind} {value!r}; valid {kind}s: {', '.join(valid)}")
