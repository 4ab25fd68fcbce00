"""Making frozen dataclass objects in hot loops.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), which costs about three times what storing the fields directly
does. The simulator's replays make a job object or a planner spec at nearly every event, so
:func:`maker` gives them a function that makes the same object, equal field for field, by
storing the fields directly: through the slots' descriptors (``slots=True``) or into the
instance's ``__dict__``. The fields, their order and their defaults are read from the class,
so a field added to it is made too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["FAST", "maker"]

T = TypeVar("T")

# Whether the callers use :func:`maker`'s functions (False only to check that they make the
# same objects as the classes themselves).
FAST = True


def maker(cls: type[T]) -> Callable[..., T]:
    """A function taking the fields of the frozen dataclass ``cls`` as keywords (the same
    defaults) and returning the object ``cls(**fields)`` would, without its ``__init__``.
    ``cls`` must have no ``__post_init__``, no ``default_factory`` and no ``InitVar``."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: a dataclass without __post_init__ is needed")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    if any(f.default_factory is not dataclasses.MISSING for f in fields):
        raise TypeError(f"{cls.__name__}: a field with default_factory cannot be made here")
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params = []
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
    body = ["    o = _new(_cls)"]
    if "__slots__" in cls.__dict__:
        for f in fields:
            scope[f"_s_{f.name}"] = cls.__dict__[f.name].__set__
            body.append(f"    _s_{f.name}(o, {f.name})")
    else:
        body.append("    o.__dict__.update(" + ", ".join(f"{f.name}={f.name}" for f in fields) + ")")
    source = f"def make(*, {', '.join(params)}):\n" + "\n".join(body) + "\n    return o\n"
    exec(source, scope)  # noqa: S102  # source built from the class's own field names
    make: Callable[..., T] = scope["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make
