"""Packing sized items, in order, into as few groups as fit under a budget."""

from __future__ import annotations

from collections.abc import Sequence


def pack_greedy(sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Indices of `sizes` grouped in order; each group sums to at most `budget`.

    Every group holds at least one item, so an item larger than the budget gets a group of its
    own (the caller splits or truncates it). For items kept in order, filling each group as far
    as it goes gives the fewest groups possible.
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for index, size in enumerate(sizes):
        if current and used + size > budget:
            groups.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    if current:
        groups.append(current)
    return groups
