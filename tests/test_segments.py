"""Segment grouping: the constraints hold for any shot list (property test)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from moviemem.ingest.frames import pool_indices, strip_times
from moviemem.ingest.segments import fixed_windows, group_shots

shot_lengths = st.lists(st.floats(min_value=0.2, max_value=150.0, allow_nan=False), min_size=1, max_size=120)


def _shots(lengths: list[float]) -> list[tuple[float, float]]:
    out, t = [], 0.0
    for n in lengths:
        out.append((t, t + n))
        t += n
    return out


@settings(max_examples=400, deadline=None)
@given(shot_lengths, st.sampled_from([(60.0, 10.0), (30.0, 5.0), (120.0, 20.0)]))
def test_group_shots_constraints(lengths: list[float], sizes: tuple[float, float]) -> None:
    target, minimum = sizes
    shots = _shots(lengths)
    segs = group_shots(shots, target, minimum)
    total = shots[-1][1]
    # contiguous cover of the film, in order, every boundary a shot boundary (no shot split)
    assert segs[0].start == shots[0][0] and segs[-1].end == total
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))
    assert segs[0].first_shot == 0 and segs[-1].last_shot == len(shots) - 1
    assert all(a.last_shot + 1 == b.first_shot for a, b in zip(segs, segs[1:]))
    for s in segs:
        assert s.start == shots[s.first_shot][0] and s.end == shots[s.last_shot][1]
        dur = s.end - s.start
        # at least the minimum, unless the whole film is shorter
        assert dur >= minimum - 1e-9 or (len(segs) == 1 and total < minimum)
        # a multi-shot segment never runs far past the target: at most target + its longest shot + the minimum
        if s.last_shot > s.first_shot:
            longest = max(shots[i][1] - shots[i][0] for i in range(s.first_shot, s.last_shot + 1))
            assert dur <= target + longest + minimum + 1e-9


def test_group_shots_prefers_the_boundary_nearest_the_target() -> None:
    segs = group_shots(_shots([25, 25, 25, 25, 25, 25]), 60, 10)
    assert [(s.start, s.end) for s in segs] == [(0, 50), (50, 100), (100, 150)]


def test_group_shots_single_long_shot_is_its_own_segment() -> None:
    segs = group_shots(_shots([5, 200, 5, 60]), 60, 10)
    assert [(s.first_shot, s.last_shot) for s in segs] == [(0, 1), (2, 3)]


def test_fixed_windows_merge_short_tail() -> None:
    segs = fixed_windows(125.0, 60.0, 10.0)
    assert [(s.start, s.end) for s in segs] == [(0, 60), (60, 125.0)]
    assert [(s.start, s.end) for s in fixed_windows(5.0)] == [(0, 5.0)]


def test_pool_indices_follow_floor_formula() -> None:
    assert pool_indices(1000, 4) == [0, 250, 500, 750]
    assert pool_indices(10, 64) == list(range(10))
    idx = pool_indices(14387, 256)
    assert len(idx) == 256 and idx[1] == 14387 // 256 and idx[-1] == (255 * 14387) // 256


def test_strip_times_every_two_seconds() -> None:
    assert strip_times(7.0, 0.5) == [0.0, 2.0, 4.0, 6.0]
