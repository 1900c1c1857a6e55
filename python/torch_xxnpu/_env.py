"""Boolean environment variables, parsed as the C++ side parses them (device/env_flag.h):
1/true/yes/on and 0/false/no/off in any case; unset or empty gives the default; anything
else is a ValueError naming the variable, so that "false" never means true."""
import os

TRUE_VALUES = ("1", "true", "yes", "on")
FALSE_VALUES = ("0", "false", "no", "off")


def parse_flag(name, value, default=False):
    """`value` of the variable `name` (None: unset) -> bool."""
    v = (value or "").strip().lower()
    if not v:
        return default
    if v in TRUE_VALUES:
        return True
    if v in FALSE_VALUES:
        return False
    raise ValueError(f"{name}={value!r}: expected 1/true/yes/on or 0/false/no/off (any case)")


def env_flag(name, default=False):
    """The boolean environment variable `name` of this process."""
    return parse_flag(name, os.environ.get(name), default)
