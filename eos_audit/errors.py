"""The few exceptions eos-audit raises on purpose; anything else is an internal error (exit 3)."""


class EosAuditError(Exception):
    """Base class: a problem the user can fix. Its message says what was wrong and what to do."""

    exit_code = 2


class ConfigError(EosAuditError):
    """A configuration file or option is invalid (unknown key, wrong type, bad value)."""


class InputSchemaError(EosAuditError):
    """An input is structurally wrong: a required column is missing or has an unusable type."""


class InputNotFoundError(EosAuditError):
    """An input path does not exist or holds nothing eos-audit can read."""


class SinkError(EosAuditError):
    """An output table cannot be written (for example an existing table with another schema)."""


class SparkConnectError(EosAuditError):
    """A Spark Connect server cannot be reached, or its Python workers cannot run eos-audit."""
