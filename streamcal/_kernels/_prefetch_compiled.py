"""numba's forms of :mod:`streamcal._kernels._prefetch` (imported when the process switches to
compiled kernels, before any kernel compiles).

Each hint is LLVM's ``llvm.prefetch`` (read, high locality, data cache) at the element's address;
the processor may drop it, and it never faults. ``compiled_tier`` is the constant True.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from streamcal._kernels import _prefetch


def _emit_prefetch(builder, ptr) -> None:
    byte_ptr = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    # the intrinsic's name carries its pointer type: ``ptr`` (opaque pointers), else ``i8*``
    name = "llvm.prefetch.p0" if str(byte_ptr) == "ptr" else "llvm.prefetch.p0i8"
    fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, name)
    builder.call(fn, [builder.bitcast(ptr, byte_ptr), i32(0), i32(3), i32(1)])


@intrinsic
def _prefetch_at(typingctx, arr, r, c):
    """Prefetch ``arr[c]`` (1-d, ``r`` ignored) or ``arr[r, c]`` (2-d)."""

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = [args[2]] if aryty.ndim == 1 else [args[1], args[2]]
        _emit_prefetch(builder, cgutils.get_item_pointer(context, builder, aryty, ary, index, wraparound=False))
        return context.get_dummy_value()

    return types.void(arr, r, c), codegen


@overload(_prefetch.compiled_tier)
def _compiled_tier():
    return lambda: True


@overload(_prefetch.prefetch_1d)
def _prefetch_1d(arr, i):
    return lambda arr, i: _prefetch_at(arr, i, i)


@overload(_prefetch.prefetch_2d)
def _prefetch_2d(arr, r, c):
    return lambda arr, r, c: _prefetch_at(arr, r, c)
