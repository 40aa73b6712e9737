"""What a user can get wrong or a machine can refuse, as opposed to a bug: the CLI prints such an error as one line
and exits 1 (a configuration error: 2), without a traceback. Every module's own error class derives from
:class:`UserError`; this module imports nothing of the package, so the CLI catches them all without loading
PyTorch. Also the one way an unknown name is reported (:func:`unknown`)."""

import difflib
from typing import Any, Iterable


class UserError(Exception):
    """A problem of the input (a file, a setting, a dataset) or of the machine (a full disk), with a message that
    names it and says what to do."""


class ConfigError(UserError, ValueError):
    """A configuration problem; the message names the key and the allowed values (the CLI exits 2)."""


#: a list of allowed names longer than this is not printed whole: the closest few are, and the count
LISTED = 12


def did_you_mean(name: Any, choices: Iterable[Any], n: int = 3, cutoff: float = 0.6) -> str:
    """``did you mean 'a', 'b' or 'c'?`` with the closest ``n`` of ``choices`` (difflib), or "" when none is close: the
    one way a misspelt name gets its suggestion."""
    close = difflib.get_close_matches(str(name), [str(c) for c in dict.fromkeys(choices)], n=n, cutoff=cutoff)
    if not close:
        return ""
    return "did you mean " + (", ".join(map(repr, close[:-1])) + " or " if len(close) > 1 else "") + f"{close[-1]!r}?"


def unknown(what: str, name: Any, choices: Iterable[Any], listing: str = "") -> str:
    """``unknown <what> <name>; did you mean ...?`` with the closest few of ``choices`` (difflib), and the whole list
    only when it is short; ``listing`` says where the whole list is (a command)."""
    choices = [str(c) for c in dict.fromkeys(choices)]
    guess = did_you_mean(name, choices)
    if len(choices) <= LISTED:
        return f"unknown {what} {name!r}; " + (f"{guess} " if guess else "") + f"allowed: {sorted(choices)}"
    where = f"; {listing}" if listing else ""
    return f"unknown {what} {name!r}; {guess or 'nothing with a similar name'} ({len(choices)} {what}s{where})"
