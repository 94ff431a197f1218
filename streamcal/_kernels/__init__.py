"""numba kernels: no validation, contiguous float64 / intp arrays, names state preconditions.

Every kernel is compiled with the options in :mod:`streamcal._kernels._config`.
"""
