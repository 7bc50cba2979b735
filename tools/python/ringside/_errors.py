"""The exceptions of every backend: the C extension raises these too (it imports this module)."""


class RingError(Exception):
    """Why a bot cannot be attached, a metric registered or a value recorded, naming the bot."""


BotError = RingError


class RingValueError(RingError, ValueError):
    """A value out of its metric's range (a negative observation, say): a RingError and a ValueError."""


class RingTypeError(RingError, TypeError):
    """A value of a type its metric does not take (a string, say): a RingError and a TypeError."""
