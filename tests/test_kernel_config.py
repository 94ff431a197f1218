"""The JIT options of ``streamcal._kernels._config``: kernels compiled without reference counts."""

from __future__ import annotations

import numpy as np
import pytest

from streamcal._kernels import _config

# The test kernels live as long as the process: numba keeps weak references to its
# dispatchers, and river's memory check (``check_bounded_memory_growth``, in later tests of the
# same worker) walks into numba's registries from the calibrators' compiled entry points and
# fails on a dead one.


@_config.jit_noalloc(cache=False)
def _doubled_sum(a):
    return (a * 2.0).sum()  # ``a * 2.0`` is a new array


@_config.jit_noalloc(cache=False)
def _fill(packed, start, stop):
    floats = packed[start:stop]
    ints = packed[stop:].view(np.int64)
    for i in range(floats.shape[0]):
        floats[i] = 0.5 * i
    for i in range(ints.shape[0]):
        ints[i] = i
    return floats.shape[0] + ints.shape[0]


@pytest.mark.skipif(
    not _config.NO_REFCOUNT_OPTIONS,
    reason="this numba does not know the _nrt option: jit_noalloc compiles as jit does",
)
def test_a_noalloc_kernel_that_allocates_fails_to_compile():
    """The safety argument of ``jit_noalloc``: allocating cannot slip into such a kernel."""
    import numba

    # numba words it one of two ways, depending on what the process compiled before
    with pytest.raises(numba.core.errors.NumbaError, match=r"NRT required but not enabled|array_allocate"):
        _doubled_sum(np.ones(3))


def test_a_noalloc_kernel_writes_into_views_of_its_arguments():
    """What the PAV kernels do: slices and reinterpreted views of the arrays they are given."""
    packed = np.zeros(10)
    assert _fill(packed, 2, 6) == 8
    np.testing.assert_array_equal(packed[2:6], [0.0, 0.5, 1.0, 1.5])
    np.testing.assert_array_equal(packed[6:].view(np.int64), [0, 1, 2, 3])
    assert packed[0] == packed[1] == 0.0


def test_the_pav_kernels_are_compiled_without_reference_counts():
    """The per-event kernels take the option (the speed figures in docs/benchmarks.md rely on it)."""
    from streamcal._kernels import histogram, ipav, plan

    kernels = (
        ipav.pav_process_inplace,
        ipav.pav_prequential_inplace,
        ipav.pav_learn_packed_inplace,
        histogram.histogram_learn_many_inplace,
        plan.plan_merge,
    )
    for kernel in kernels:
        for name, value in _config.NO_REFCOUNT_OPTIONS.items():
            assert kernel.targetoptions.get(name) == value, (kernel, name)
