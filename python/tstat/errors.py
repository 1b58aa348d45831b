"""The exception every tstat call raises: tstat.Error."""


class Error(Exception):
    """A tstat error. `code` is the status code's name ("not_found",
    "invalid_argument", "corruption", "step_unavailable", ...), `message`
    the C++ message, which names what failed and where."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
