"""Subscriptions by regular expression (KIP-848 ``SubscribedTopicRegex``).

Kafka compiles them with RE2/J and resolves a regex to the topic names it *fully* matches. Here Python's ``re``
with ``fullmatch`` stands in: the syntax both accept means the same for ordinary patterns (``orders-.*``,
``(a|b)-\\d+``); RE2-only or ``re``-only constructs (possessive quantifiers, backreferences, lookarounds) are judged
by ``re``, and error messages are ``re``'s, not RE2/J's.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern | None:
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return None


def regex_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid regular expression, or None when it is."""
    try:
        re.compile(pattern)
        return None
    except re.error as exc:
        return str(exc)
    except (RecursionError, OverflowError):
        return "pattern too complex"


def resolve(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    compiled = compile_regex(pattern)
    if compiled is None:
        return frozenset()
    return frozenset(name for name in topic_names if compiled.fullmatch(name))
