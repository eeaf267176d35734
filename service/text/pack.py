"""Packing sized items, in order, into as few groups as fit under a budget."""

from __future__ import annotations

from collections.abc import Sequence


def pack_greedy(sizes: Sequence[int], budget: int, *, first: int | None = None) -> list[list[int]]:
    """Indices of `sizes` grouped in order; each group sums to at most `budget` (the first
    group to at most `first`, when the first request has other room than the rest).

    Every group holds at least one item, so an item larger than the budget gets a group of its
    own (the caller splits or truncates it). For items kept in order, filling each group as far
    as it goes gives the fewest groups possible.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for index, size in enumerate(sizes):
        limit = first if first is not None and not groups else budget
        if current and used + size > limit:
            groups.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    if current:
        groups.append(current)
    return groups
