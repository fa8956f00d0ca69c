"""The one exception type that carries a sentence meant for the user, not a traceback."""


class UserError(Exception):
    """A mistake the user can fix (bad input, missing file, unknown model): shown as one clear sentence."""
