"""What a user can get wrong or a machine can refuse, as opposed to a bug: the CLI prints such an error as one line
and exits 1 (a configuration error: 2), without a traceback. Every module's own error class derives from
:class:`UserError`; this module imports nothing, so the CLI catches them all without loading PyTorch."""


class UserError(Exception):
    """A problem of the input (a file, a setting, a dataset) or of the machine (a full disk), with a message that
    names it and says what to do."""


class ConfigError(UserError, ValueError):
    """A configuration problem; the message names the key and the allowed values (the CLI exits 2)."""
