"""The one exception bad input raises: it names the field, what was given and what is allowed."""

from __future__ import annotations


class ConfigError(ValueError):
    """A sweep configuration (or an argument of ``tune``) is invalid.

    ``field`` is the dotted path of the offending entry (``space.lr``,
    ``scheduler.reduction_factor``, ``budget.time``, ``trainable``); ``str(err)`` starts with it,
    so the CLI can print the error as-is and exit with status 2. When several entries are wrong,
    ``errors`` holds every ``(field, message)`` pair, the first of them being ``(field, message)``.

    Example:
        >>> err = ConfigError("budget.time", "must be > 0; got -5")
        >>> str(err)
        'budget.time: must be > 0; got -5'
    """

    def __init__(
        self, field: str, message: str, errors: list[tuple[str, str]] | None = None
    ) -> None:
        self.field = field
        self.message = message
        self.errors: list[tuple[str, str]] = list(errors) if errors else [(field, message)]
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # keeps the error intact across processes (pickle uses args otherwise)
        return (type(self), (self.field, self.message, self.errors))
