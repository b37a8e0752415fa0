"""openinfer.compare: each element is held to its own expected value, never to the array's largest."""

from __future__ import annotations

import numpy as np
import pytest

from openinfer.compare import FLOAT_TOLERANCE, compare
from openinfer.dtypes import lookup


@pytest.mark.parametrize("name", ["f64", "f32", "f16", "bf16", "f8"])
def test_an_outlier_does_not_widen_the_tolerance_of_other_elements(name):
    """A row reaching 1e30 (exp of 69) beside ordinary values: an error far above each small
    element's tolerance must fail, however small it is next to the outlier."""
    rtol, atol = FLOAT_TOLERANCE[name]
    big = {"f64": 1e300, "f32": 1e30, "f16": 6e4, "bf16": 1e30, "f8": 5e4}[name]
    ref = np.array([1.0, 2.0, 0.5, big])
    for k in range(3):
        got = ref.copy()
        got[k] += 2 * (atol + rtol * abs(ref[k]))    # twice the element's own tolerance
        c = compare("y", lookup(name), ref, got)
        assert not c.ok, (name, k, c)
        assert f"first at ({k},)" in c.detail


@pytest.mark.parametrize("name", ["f64", "f32", "f16", "bf16", "f8"])
def test_errors_within_each_elements_tolerance_pass(name):
    rtol, atol = FLOAT_TOLERANCE[name]
    ref = np.array([0.0, -0.0, 1e-3, 1.0, -3.0, 250.0, np.nan, np.inf, -np.inf])
    got = ref + np.where(np.isfinite(ref), 0.9 * (atol + rtol * np.abs(ref)), 0.0)
    assert compare("y", lookup(name), ref, got).ok


def test_the_large_element_itself_is_held_to_its_own_relative_tolerance():
    ref = np.array([1.0, 1e30], np.float32)
    assert compare("y", lookup("f32"), ref, np.array([1.0, 1e30 * (1 + 5e-5)], np.float32)).ok
    assert not compare("y", lookup("f32"), ref, np.array([1.0, 1e30 * (1 + 5e-4)], np.float32)).ok


def test_the_absolute_floor_near_zero_does_not_grow_with_the_array():
    """Near zero only the dtype's floor applies: 1e-3 on an f32 zero fails beside 1e30 as alone."""
    for ref in (np.array([0.0], np.float32), np.array([0.0, 1e30], np.float32)):
        got = ref.copy()
        got[0] = 1e-3
        assert not compare("y", lookup("f32"), ref, got).ok


def test_specials_and_integers():
    f32 = lookup("f32")
    assert not compare("y", f32, np.array([np.nan, 1.0]), np.array([0.0, 1.0])).ok
    assert not compare("y", f32, np.array([1.0, 1.0]), np.array([np.nan, 1.0])).ok
    assert not compare("y", f32, np.array([np.inf]), np.array([-np.inf])).ok
    assert not compare("y", f32, np.array([1.0]), np.array([np.inf])).ok
    assert not compare("y", f32, np.zeros(2), np.zeros(3)).ok
    i32 = lookup("i32")
    assert compare("y", i32, np.array([5, -7]), np.array([5, -7])).ok
    c = compare("y", i32, np.array([5, -7]), np.array([5, -6]))
    assert not c.ok and "first at (1,)" in c.detail
