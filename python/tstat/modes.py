"""Training modes, as smdebug names them (tstat.modes.TRAIN, ...)."""

import enum


class ModeKeys(enum.IntEnum):
    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4


TRAIN = ModeKeys.TRAIN
EVAL = ModeKeys.EVAL
PREDICT = ModeKeys.PREDICT
GLOBAL = ModeKeys.GLOBAL


def mode_of(mode):
    """A ModeKeys from a ModeKeys, an int, a name ("TRAIN", "eval") or None
    (GLOBAL: every mode, steps counted globally)."""
    if mode is None:
        return GLOBAL
    if isinstance(mode, str):
        try:
            return ModeKeys[mode.upper()]
        except KeyError:
            from tstat.errors import Error
            raise Error("invalid_argument",
                        f"mode {mode!r} is not TRAIN, EVAL, PREDICT or GLOBAL") from None
    try:
        return ModeKeys(int(mode))
    except (ValueError, TypeError):
        from tstat.errors import Error
        raise Error("invalid_argument",
                    f"mode {mode!r} is not TRAIN, EVAL, PREDICT or GLOBAL") from None
