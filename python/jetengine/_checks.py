"""Argument checks whose errors name the argument: TypeError for a wrong type, ValueError for a
value out of range."""

import math
import numbers


def check_int(name, value, minimum=None, maximum=None):
    """An integer (numpy integers too, bool not) within [minimum, maximum]; returns it as int."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_float(name, value, minimum=None, maximum=None, above=None):
    """A finite real number within [minimum, maximum] and > above; returns it as float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    if above is not None and value <= above:
        raise ValueError(f"{name} must be > {above}, got {value}")
    return value


def check_bool(name, value):
    """True or False, numpy's too (not 0, 1 or None); returns a Python bool."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def check_choice(name, value, choices):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_token_ids(name, ids):
    """A sequence of token ids (list, tuple, numpy array, torch tensor) as a list of ints in
    [0, 2**31)."""
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"{name} must be a list of token ids, got {type(ids).__name__}")
    values = ids.tolist() if hasattr(ids, "tolist") else ids
    out = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{name} must hold ints, got {type(value).__name__} {value!r}")
        out.append(int(value))
    if out and (min(out) < 0 or max(out) >= 2**31):
        bad = min(out) if min(out) < 0 else max(out)
        raise ValueError(f"{name} holds token id {bad}, outside [0, 2**31)")
    return out
