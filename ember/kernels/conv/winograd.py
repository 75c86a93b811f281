"""3x3 stride-1 convolution by Winograd's minimal filtering F(2x2, 3x3) (Lavin & Gray, 2015), compiled.

Each 2x2 block of outputs is computed from a 4x4 input tile as A^T [(G g G^T) * (B^T d B)] A: the products
of the tile and weight transforms are 16 GEMMs of (O, C) by (C, tiles), 2.25 times fewer multiplications
than im2col's one GEMM of (O, 9C) by (9C, pixels), and no nine-fold patch copy. The transforms are exact
sums of a few values (the weight's halves are exact in binary), so results differ from im2col only by
float32 rounding in a different order (measured below im2col's own error against float64).

Used by conv2d (and so conv_transpose2d's stride-1 path) for float32 3x3 stride-1 undilated ungrouped
layers with at least 8 channels each way, when Numba is installed; otherwise the im2col path runs.

Where Ember's GEMM runs, the forward is one compiled kernel per thread (conv3x3_tile_rows): each thread takes a
range of the batch's tile rows, and for a block of them at a time makes the input tiles, runs the 16 products
on the GEMM driver and writes the output tiles, so the block's transformed tiles stay in cache and a single
sample is split over the threads as well as a batch, with no Python in the split (parallel.run_kernel).
ResNet-18's (1, 64, 56, 56) and (1, 128, 28, 28) layers went from 0.67 ms each in two row bands (each thread
transforming the whole weight, each band's tiles out to memory and back) to 0.54 (PyTorch 0.55 and 0.54),
2026-11-27. Its values are the other path's bit for bit where that path's products run on the driver too (the
same transforms and in-order GEMM sums), within float32 rounding of them where NumPy's BLAS runs them. The weight
gradient's sum over samples is likewise one kernel per thread (conv3x3_weight_grad_samples), so no Winograd split
runs Python; alone it ran ResNet-20's (32, 64, 8, 8) weight gradient no faster (0.47-0.49 ms either way).
"""

from __future__ import annotations

import numpy as np

from ember.kernels import gemm, parallel, sgemm
from ember.kernels.numba_loader import MIN_ELEMENTS, kernel_for
from ember.kernels.sgemm_microkernel import microkernel_address, transpose_address

# One tile's transforms, shared by the kernels below and conv3x3_tile_rows (inlined: the same code in each)
_TILE_SOURCE = '''
import numpy as np
from numba import njit


# Inputs whose magnitude is above this (or that are inf or NaN) are declined: the transforms take sums and
# differences of several values, so inf - inf would make NaN where the convolution's true value is inf, and values
# near float32's largest would overflow where the true outputs are in range. im2col then computes them.
LIMIT = np.float32(2.0 ** 100)


@njit(inline="always")
def u(i):
    # an unsigned index: Numba wraps a possibly negative one around, and that test stops the loops vectorising
    return np.uint64(i)


@njit(inline="always")
def input_tile(pf, b0, PW, j, V, q, S):
    # V[q + k*S] = (B^T d B)[k // 4, k % 4] for the 4x4 tile d of the flat image pf whose rows start at b0 + r*PW,
    # columns j..j+3
    b1 = b0 + PW
    b2 = b1 + PW
    b3 = b2 + PW
    # B^T d: rows d0 - d2, d1 + d2, d2 - d1, d1 - d3 (d_r: row r of the tile)
    a00 = pf[u(b0 + j)] - pf[u(b2 + j)]
    a01 = pf[u(b0 + j + 1)] - pf[u(b2 + j + 1)]
    a02 = pf[u(b0 + j + 2)] - pf[u(b2 + j + 2)]
    a03 = pf[u(b0 + j + 3)] - pf[u(b2 + j + 3)]
    a10 = pf[u(b1 + j)] + pf[u(b2 + j)]
    a11 = pf[u(b1 + j + 1)] + pf[u(b2 + j + 1)]
    a12 = pf[u(b1 + j + 2)] + pf[u(b2 + j + 2)]
    a13 = pf[u(b1 + j + 3)] + pf[u(b2 + j + 3)]
    a20 = pf[u(b2 + j)] - pf[u(b1 + j)]
    a21 = pf[u(b2 + j + 1)] - pf[u(b1 + j + 1)]
    a22 = pf[u(b2 + j + 2)] - pf[u(b1 + j + 2)]
    a23 = pf[u(b2 + j + 3)] - pf[u(b1 + j + 3)]
    a30 = pf[u(b1 + j)] - pf[u(b3 + j)]
    a31 = pf[u(b1 + j + 1)] - pf[u(b3 + j + 1)]
    a32 = pf[u(b1 + j + 2)] - pf[u(b3 + j + 2)]
    a33 = pf[u(b1 + j + 3)] - pf[u(b3 + j + 3)]
    # (B^T d) B: the same combinations along each row
    V[u(q)] = a00 - a02
    V[u(q + S)] = a01 + a02
    V[u(q + 2 * S)] = a02 - a01
    V[u(q + 3 * S)] = a01 - a03
    V[u(q + 4 * S)] = a10 - a12
    V[u(q + 5 * S)] = a11 + a12
    V[u(q + 6 * S)] = a12 - a11
    V[u(q + 7 * S)] = a11 - a13
    V[u(q + 8 * S)] = a20 - a22
    V[u(q + 9 * S)] = a21 + a22
    V[u(q + 10 * S)] = a22 - a21
    V[u(q + 11 * S)] = a21 - a23
    V[u(q + 12 * S)] = a30 - a32
    V[u(q + 13 * S)] = a31 + a32
    V[u(q + 14 * S)] = a32 - a31
    V[u(q + 15 * S)] = a31 - a33


@njit(inline="always")
def output_tile(M, q, S, of, d, OW, whole, right, below):
    # of[d], of[d + 1], of[d + OW], of[d + OW + 1] = (A^T m A) for m[k // 4, k % 4] = M[q + k*S]; `whole`: all four
    # lie in the image, else `right` (the column d + 1) and `below` (the row d + OW) say which do
    m0 = M[u(q)]
    m1 = M[u(q + S)]
    m2 = M[u(q + 2 * S)]
    m3 = M[u(q + 3 * S)]
    m4 = M[u(q + 4 * S)]
    m5 = M[u(q + 5 * S)]
    m6 = M[u(q + 6 * S)]
    m7 = M[u(q + 7 * S)]
    m8 = M[u(q + 8 * S)]
    m9 = M[u(q + 9 * S)]
    m10 = M[u(q + 10 * S)]
    m11 = M[u(q + 11 * S)]
    m12 = M[u(q + 12 * S)]
    m13 = M[u(q + 13 * S)]
    m14 = M[u(q + 14 * S)]
    m15 = M[u(q + 15 * S)]
    # A^T m: rows m0 + m1 + m2, m1 - m2 - m3 (m_r: row r), then the same along each row
    r00 = m0 + m4 + m8
    r01 = m1 + m5 + m9
    r02 = m2 + m6 + m10
    r03 = m3 + m7 + m11
    r10 = m4 - m8 - m12
    r11 = m5 - m9 - m13
    r12 = m6 - m10 - m14
    r13 = m7 - m11 - m15
    of[u(d)] = r00 + r01 + r02
    if whole:
        of[u(d + 1)] = r01 - r02 - r03
        of[u(d + OW)] = r10 + r11 + r12
        of[u(d + OW + 1)] = r11 - r12 - r13
    else:
        if right:
            of[u(d + 1)] = r01 - r02 - r03
        if below:
            of[u(d + OW)] = r10 + r11 + r12
            if right:
                of[u(d + OW + 1)] = r11 - r12 - r13


@njit(inline="always")
def image_tiles(xf, xb, H, W, pt, pl, th, tw, pf, PW, V, q, S):
    # V[q + ty*tw + tx + k*S] = (B^T d B)[k // 4, k % 4] for the tiles at (2*ty - pt, 2*tx - pl) of the H x W image at
    # xf[xb:], first copied into pf, a zeroed (2*th + 2) x PW scratch image whose border stays zero (the padding);
    # False where a value is beyond LIMIT (or NaN)
    ok = True
    for y in range(H):
        for xx in range(W):
            v = xf[u(xb + y * W + xx)]
            ok = ok & (abs(v) <= LIMIT)
            pf[u((y + pt) * PW + xx + pl)] = v
    for ty in range(th):
        q0 = q + ty * tw
        for tx in range(tw):
            input_tile(pf, 2 * ty * PW, PW, 2 * tx, V, q0 + tx, S)
    return ok


@njit(inline="always")
def map_gradient_tiles(gf, gb, OH, OW, th, tw, Z, q, S):
    # Z[q + ty*tw + tx + k*S] = (A e A^T)[k // 4, k % 4] for the 2x2 tiles e at (2*ty, 2*tx) of the OH x OW output
    # gradient at gf[gb:] (zero past it): the adjoint of output_tile
    zero = gf.dtype.type(0)
    ok = True
    for ty in range(th):
        y = 2 * ty
        q0 = q + ty * tw
        whole = y + 1 < OH and OW % 2 == 0
        for tx in range(tw):
            j = 2 * tx
            d = gb + y * OW + j
            e00 = gf[u(d)]
            if whole:
                e01 = gf[u(d + 1)]
                e10 = gf[u(d + OW)]
                e11 = gf[u(d + OW + 1)]
            else:
                e01 = gf[u(d + 1)] if j + 1 < OW else zero
                e10 = gf[u(d + OW)] if y + 1 < OH else zero
                e11 = gf[u(d + OW + 1)] if (y + 1 < OH and j + 1 < OW) else zero
            ok = ok & (max(max(abs(e00), abs(e01)), max(abs(e10), abs(e11))) <= LIMIT)
            # A e: rows e0, e0 + e1, e0 - e1, -e1 (e_r: row r); then each row [p, r] -> [p, p + r, p - r, -r]
            p0 = e00
            p1 = e00 + e10
            p2 = e00 - e10
            p3 = -e10
            r0 = e01
            r1 = e01 + e11
            r2 = e01 - e11
            r3 = -e11
            q1 = q0 + tx
            Z[u(q1)] = p0
            Z[u(q1 + S)] = p0 + r0
            Z[u(q1 + 2 * S)] = p0 - r0
            Z[u(q1 + 3 * S)] = -r0
            Z[u(q1 + 4 * S)] = p1
            Z[u(q1 + 5 * S)] = p1 + r1
            Z[u(q1 + 6 * S)] = p1 - r1
            Z[u(q1 + 7 * S)] = -r1
            Z[u(q1 + 8 * S)] = p2
            Z[u(q1 + 9 * S)] = p2 + r2
            Z[u(q1 + 10 * S)] = p2 - r2
            Z[u(q1 + 11 * S)] = -r2
            Z[u(q1 + 12 * S)] = p3
            Z[u(q1 + 13 * S)] = p3 + r3
            Z[u(q1 + 14 * S)] = p3 - r3
            Z[u(q1 + 15 * S)] = -r3
    return ok
'''

_SOURCE = _TILE_SOURCE + '''


def weight_tiles(w, U, plane_stride, lo, hi):
    # U[k*plane_stride + o*C + c] = (G g G^T)[k // 4, k % 4] for the 3x3 weight g = w[o, c], o in [lo, hi). In float64
    # from the weight's values, written out straight: a loop over the four rows with a branch per row ran 1.3x slower
    # (ResNet-18's 256 x 256 weight: 1.11 -> 0.80-0.89 ms on one thread), with the same values
    C = w.shape[1]
    S = plane_stride
    for o in range(lo, hi):
        for c in range(C):
            q = o * C + c
            a0, a1, a2 = np.float64(w[o, c, 0, 0]), np.float64(w[o, c, 0, 1]), np.float64(w[o, c, 0, 2])
            b0, b1, b2 = np.float64(w[o, c, 1, 0]), np.float64(w[o, c, 1, 1]), np.float64(w[o, c, 1, 2])
            d0, d1, d2 = np.float64(w[o, c, 2, 0]), np.float64(w[o, c, 2, 1]), np.float64(w[o, c, 2, 2])
            # the rows of G g: g0, (g0 + g1 + g2) / 2, (g0 - g1 + g2) / 2, g2 (g_r: row r of g)
            p0, p1, p2 = (a0 + b0 + d0) * 0.5, (a1 + b1 + d1) * 0.5, (a2 + b2 + d2) * 0.5
            m0, m1, m2 = (a0 - b0 + d0) * 0.5, (a1 - b1 + d1) * 0.5, (a2 - b2 + d2) * 0.5
            # each row times G^T: the same combinations along it
            U[q] = a0
            U[q + S] = (a0 + a1 + a2) * 0.5
            U[q + 2 * S] = (a0 - a1 + a2) * 0.5
            U[q + 3 * S] = a2
            U[q + 4 * S] = p0
            U[q + 5 * S] = (p0 + p1 + p2) * 0.5
            U[q + 6 * S] = (p0 - p1 + p2) * 0.5
            U[q + 7 * S] = p2
            U[q + 8 * S] = m0
            U[q + 9 * S] = (m0 + m1 + m2) * 0.5
            U[q + 10 * S] = (m0 - m1 + m2) * 0.5
            U[q + 11 * S] = m2
            U[q + 12 * S] = d0
            U[q + 13 * S] = (d0 + d1 + d2) * 0.5
            U[q + 14 * S] = (d0 - d1 + d2) * 0.5
            U[q + 15 * S] = d2


def input_tiles(x, pt, pl, th, tw, V, plane_stride, plane):
    # V[k*plane_stride + c*T + t] = (B^T d B)[k // 4, k % 4] of the 4x4 tile d at (2*ty - pt, 2*tx - pl);
    # plane: a zeroed (2*th + 2, 2*tw + 2) scratch image whose border stays zero (the padding); False where an input
    # value is beyond LIMIT (or NaN)
    N, C, H, W = x.shape
    T = N * th * tw
    xf = x.reshape(-1)
    pf = plane.reshape(-1)
    ok = True
    for n in range(N):
        for c in range(C):
            ok = ok & image_tiles(xf, (n * C + c) * H * W, H, W, pt, pl, th, tw, pf, plane.shape[1], V,
                                  c * T + n * th * tw, plane_stride)
    return ok


def gradient_tiles(g, th, tw, Z, plane_stride):
    # Z[k*plane_stride + o*T + t] = (A e A^T)[k // 4, k % 4] for the 2x2 output-gradient tile e at (2*ty, 2*tx)
    # (zero past the image): the adjoint of output_tiles; False where a value is beyond LIMIT (or NaN)
    N, O, OH, OW = g.shape
    T = N * th * tw
    gf = g.reshape(-1)
    ok = True
    for n in range(N):
        for o in range(O):
            ok = ok & map_gradient_tiles(gf, (n * O + o) * OH * OW, OH, OW, th, tw, Z, o * T + n * th * tw,
                                         plane_stride)
    return ok


def weight_from_tiles(D, gw):
    # gw[o, c] = G^T d G for the 4x4 d[k // 4, k % 4] = D[k, o, c]: the adjoint of weight_tiles
    O, C = gw.shape[0], gw.shape[1]
    for o in range(O):
        for c in range(C):
            for j in range(4):
                # G^T d, column j: d0 + (d1 + d2) / 2, (d1 - d2) / 2, (d1 + d2) / 2 + d3 (d_r: row r)
                h = (D[4 + j, o, c] + D[8 + j, o, c]) * 0.5
                v0 = D[j, o, c] + h
                v1 = (D[4 + j, o, c] - D[8 + j, o, c]) * 0.5
                v2 = h + D[12 + j, o, c]
                if j == 0:
                    a0 = v0
                    a1 = v1
                    a2 = v2
                elif j == 1:
                    b0 = v0
                    b1 = v1
                    b2 = v2
                elif j == 2:
                    c0 = v0
                    c1 = v1
                    c2 = v2
                else:
                    d0 = v0
                    d1 = v1
                    d2 = v2
            # times G along each row
            gw[o, c, 0, 0] = a0 + (b0 + c0) * 0.5
            gw[o, c, 0, 1] = (b0 - c0) * 0.5
            gw[o, c, 0, 2] = (b0 + c0) * 0.5 + d0
            gw[o, c, 1, 0] = a1 + (b1 + c1) * 0.5
            gw[o, c, 1, 1] = (b1 - c1) * 0.5
            gw[o, c, 1, 2] = (b1 + c1) * 0.5 + d1
            gw[o, c, 2, 0] = a2 + (b2 + c2) * 0.5
            gw[o, c, 2, 1] = (b2 - c2) * 0.5
            gw[o, c, 2, 2] = (b2 + c2) * 0.5 + d2


def output_tiles(M, plane_stride, th, tw, out):
    # out[n, o, 2*ty + i, 2*tx + j] = (A^T m A)[i, j], m[k // 4, k % 4] = M[k*plane_stride + o*T + t]
    N, O, OH, OW = out.shape
    T = N * th * tw
    S = plane_stride
    of = out.reshape(-1)
    for n in range(N):
        for o in range(O):
            ob = (n * O + o) * OH * OW
            for ty in range(th):
                y = 2 * ty
                q0 = o * T + (n * th + ty) * tw
                whole = y + 1 < OH and OW % 2 == 0  # every tile of this row lies inside the image
                for tx in range(tw):
                    j = 2 * tx
                    output_tile(M, q0 + tx, S, of, ob + y * OW + j, OW, whole, j + 1 < OW, y + 1 < OH)
'''

# The GEMM driver's entry point, called through its address (sgemm.driver_address)
_DRIVER_IMPORT = '''
from ember.kernels.sgemm_intrinsics import call_driver
'''

# conv3x3's forward as one kernel per thread: input tiles, the 16 products on Ember's GEMM driver and output tiles for a block of tile rows at a time, so a block's transformed input
# and products stay in the core's cache between the three steps, and a split runs no Python (parallel.run_kernel)
_TILE_ROWS_SOURCE = '''


def conv3x3_tile_rows(drv, ukr, tr, x, pt, pl, th, tw, U, su, out, rows_per_block, pad, work, plane, ok, lo, hi):
    # conv3x3's output for the batch's tile rows [lo, hi) (tile row r: sample r // th, row r % th), in blocks of at
    # most rows_per_block tile rows: the block's input tiles, V[k*SV + c*T + t] = (B^T d B)[k // 4, k % 4], into
    # work; M[k] = U[k] @ V[k] for the 16 planes (U: 16 planes of O x C, su apart) on the GEMM driver (drv: its entry
    # point; ukr, tr: its micro-kernel's and transposing copy's) into the rest of work; and out's 2x2 tiles, (A^T m A).
    # plane: a zeroed (2*rows_per_block + 2, 2*tw + 2) scratch image whose border columns stay zero (the padding);
    # ok[0]: 0 where an input value is beyond LIMIT (or NaN), else 1
    N, C, H, W = x.shape
    fine = True
    O, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    PW = plane.shape[1]
    SV = C * rows_per_block * tw + pad
    SM = O * rows_per_block * tw + pad
    xf = x.reshape(-1)
    pf = plane.reshape(-1)
    of = out.reshape(-1)
    blocks = (hi - lo + rows_per_block - 1) // rows_per_block
    for blk in range(blocks):
        r0 = lo + (hi - lo) * blk // blocks
        r1 = lo + (hi - lo) * (blk + 1) // blocks
        T = (r1 - r0) * tw
        for c in range(C):
            r = r0
            while r < r1:  # the block's rows of one sample at a time
                n = r // th
                ty0 = r - n * th
                ty1 = min(th, ty0 + r1 - r)
                xb = (n * C + c) * H * W
                y0 = 2 * ty0 - pt  # plane row i holds input row y0 + i
                for i in range(2 * (ty1 - ty0) + 2):
                    y = y0 + i
                    pb = i * PW + pl
                    if y >= 0 and y < H:
                        for xx in range(W):
                            v = xf[u(xb + y * W + xx)]
                            fine = fine & (abs(v) <= LIMIT)
                            pf[u(pb + xx)] = v
                    else:
                        for xx in range(W):
                            pf[u(pb + xx)] = 0
                for ty in range(ty1 - ty0):
                    q0 = c * T + (r - r0 + ty) * tw
                    for tx in range(tw):
                        input_tile(pf, 2 * ty * PW, PW, 2 * tx, work, q0 + tx, SV)
                r += ty1 - ty0
        m = 16 * SV  # the products' 16 planes of O x T follow the input tiles' in work
        call_driver(drv, ukr, tr, U.ctypes.data, su, C, 1, work.ctypes.data, SV, T, 1, work.ctypes.data + 4 * m, SM, T,
                    C, 0, 0, 0, 16, 0, O, 0, T)
        for o in range(O):
            r = r0
            while r < r1:
                n = r // th
                ty0 = r - n * th
                ty1 = min(th, ty0 + r1 - r)
                ob = (n * O + o) * OH * OW
                for ty in range(ty0, ty1):
                    y = 2 * ty
                    q0 = m + o * T + (r - r0 + ty - ty0) * tw
                    whole = y + 1 < OH and OW % 2 == 0  # every tile of this row lies inside the image
                    for tx in range(tw):
                        j = 2 * tx
                        output_tile(work, q0 + tx, SM, of, ob + y * OW + j, OW, whole, j + 1 < OW, y + 1 < OH)
                r += ty1 - ty0
    ok[0] = 1 if fine else 0
'''
_TILE_ROWS_KERNEL_SOURCE = _TILE_SOURCE + _DRIVER_IMPORT + _TILE_ROWS_SOURCE

# weight_grad3x3's sum over a range of samples as one kernel per thread, as conv3x3_tile_rows is for the forward
_WEIGHT_GRAD_SOURCE = '''


def conv3x3_weight_grad_samples(drv, ukr, tr, x, g, pt, pl, th, tw, samples_per_block, pad, total, part, work, plane,
                                ok, lo, hi):
    # total (16, O, C) = sum over the samples [lo, hi) of Z[k] @ V[k]^T, a block of samples_per_block samples at a
    # time: V[k*SV + c*T + t] their input tiles and Z[k*SZ + o*T + t] their output-gradient tiles in work, each
    # block's 16 products on the GEMM driver (drv, ukr, tr: its entry point's, micro-kernel's and transposing copy's
    # addresses) into part
    # and added (the first straight into total); plane: a zeroed (2*th + 2, 2*tw + 2) scratch image; ok[0]: 0 where an
    # input or gradient value is beyond LIMIT (or NaN), else 1
    N, C, H, W = x.shape
    fine = True
    O, OH, OW = g.shape[1], g.shape[2], g.shape[3]
    PW = plane.shape[1]
    xf = x.reshape(-1)
    gf = g.reshape(-1)
    pf = plane.reshape(-1)
    tf = total.reshape(-1)
    qf = part.reshape(-1)
    for s0 in range(lo, hi, samples_per_block):
        s1 = min(hi, s0 + samples_per_block)
        T = (s1 - s0) * th * tw
        SV = C * T + pad
        SZ = O * T + pad
        for n in range(s0, s1):
            for c in range(C):
                fine = fine & image_tiles(xf, (n * C + c) * H * W, H, W, pt, pl, th, tw, pf, PW, work,
                                          c * T + (n - s0) * th * tw, SV)
            for o in range(O):
                fine = fine & map_gradient_tiles(gf, (n * O + o) * OH * OW, OH, OW, th, tw, work,
                                                 16 * SV + o * T + (n - s0) * th * tw, SZ)
        into = total if s0 == lo else part
        call_driver(drv, ukr, tr, work.ctypes.data + 4 * 16 * SV, SZ, T, 1, work.ctypes.data, SV, 1, T, into.ctypes.data,
                    O * C, C, T, 0, 0, 0, 16, 0, O, 0, C)
        if s0 != lo:
            for i in range(tf.size):
                tf[i] += qf[i]
    ok[0] = 1 if fine else 0
'''
_WEIGHT_GRAD_KERNEL_SOURCE = _TILE_SOURCE + _DRIVER_IMPORT + _WEIGHT_GRAD_SOURCE

# Where im2col stays faster (2-thread AVX-512 machine, against this module's kernels): fewer than 8 channels
# (the GEMMs' inner dimension too short for BLAS), and too few tiles to repay transforming the weight
# (16*O*C values, read again by every block): 64 tiles while that is at most 4 MB (a (1, 128, 28, 28) band
# of 98 tiles: 1.05 ms against im2col's 1.38), 256 above ((4, 512, 7, 7), 64 tiles of a 16 MB transformed
# weight: 11.5 ms against im2col's 6.7).
_MIN_CHANNELS = 8
_MIN_TILES = 64
_SMALL_WEIGHT_BYTES = 4 << 20
_MIN_TILES_LARGE_WEIGHT = 256
# Each of the 16 transformed planes is padded by one cache line: with planes a power of two apart
# (16 channels x 1024 tiles x 4 bytes) the tile loops' 16 streams fell in one cache set and ran 8x slower.
_PLANE_PAD = 16
# Samples (or, in the tile-rows kernel, tile rows) per block: the block's transformed input and GEMM output stay
# in cache between the three steps, but at least _MIN_BLOCK_TILES tiles so that a large transformed weight is read
# from memory rarely and the GEMMs are wide enough. The tile-rows kernel measured within 5% from 512 KB to 8 MB
# blocks on ResNet-18's layers at batch 1 and 32 and ResNet-20's at batch 32.
_BLOCK_BYTES = 2 << 20
_MIN_BLOCK_TILES = 128
# The weight's transform is split by output channels from this many (output, input) channel pairs on the native
# pool: 32 x 32 10.3 -> 8.5 us, 64 x 64 34 -> 21, 128 x 128 131 -> 69; 16 x 16 4.4 -> 5.4 (2026-11-27).
_WEIGHT_SPLIT_PAIRS = 1024


def applies(x_shape, w_shape, dtype, stride, padding, dilation, groups) -> bool:
    """Whether conv2d of these shapes and attributes runs by Winograd F(2x2, 3x3) here (Numba present)."""
    if dtype != np.float32 or groups != 1 or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1):
        return False
    o, c, kh, kw = w_shape
    n, _, h, wd = x_shape
    if (kh, kw) != (3, 3) or c < _MIN_CHANNELS or o < _MIN_CHANNELS:
        return False
    tiles = n * ((h + padding[0] + padding[1] - 1) // 2) * ((wd + padding[2] + padding[3] - 1) // 2)
    if tiles < (_MIN_TILES if 16 * o * c * 4 <= _SMALL_WEIGHT_BYTES else _MIN_TILES_LARGE_WEIGHT):
        return False
    return kernel_for(_SOURCE, "input_tiles", np, np.dtype(dtype), int(np.prod(x_shape)) * 9) is not None


def _planes(flat: np.ndarray, stride: int, rows: int, tiles: int) -> np.ndarray:
    """The (16, rows, tiles) view of 16 planes laid `stride` values apart in `flat` (see _PLANE_PAD)."""
    return flat.reshape(16, stride)[:, : rows * tiles].reshape(16, rows, tiles)


def _samples_per_block(c: int, other_rows: int, tiles: int) -> int:
    """Samples of `tiles` tiles each per block of 16 planes of (c + other_rows) x tiles values (_BLOCK_BYTES)."""
    return max(1, _BLOCK_BYTES // (16 * (c + other_rows) * tiles * 4), -(-_MIN_BLOCK_TILES // tiles))


def _input_blocks(x, pt, pl, th, tw, other_rows: int, a: int, b: int):
    """Samples a..b of `x` a block at a time, in the calling thread's workspace: per block (lo, hi, tiles, V,
    rest, stride, ok), V (16, C, tiles) the block's transformed input tiles, `rest` the workspace's flat remainder
    for 16 planes of other_rows x tiles values `stride` apart (the other operand of the block's GEMMs), `ok`
    False where an input value is beyond LIMIT (the caller declines)."""
    c = x.shape[1]
    tiles_in = kernel_for(_SOURCE, "input_tiles", np, np.float32, MIN_ELEMENTS)
    step = _samples_per_block(c, other_rows, th * tw)
    plane = np.zeros((2 * th + 2, 2 * tw + 2), np.float32)  # its border stays zero: the padding
    for lo in range(a, b, step):
        hi = min(b, lo + step)
        t = (hi - lo) * th * tw
        sv, sw = c * t + _PLANE_PAD, other_rows * t + _PLANE_PAD
        buf = parallel.workspace(16 * (sv + sw), np.float32)
        ok = tiles_in(x[lo:hi], pt, pl, th, tw, buf[: 16 * sv], sv, plane)
        yield lo, hi, t, _planes(buf[: 16 * sv], sv, c, t), buf[16 * sv:], sw, ok


def conv3x3(x: np.ndarray, w: np.ndarray, padding) -> np.ndarray | None:
    """conv2d of float32 NCHW `x` by a (O, C, 3, 3) weight, stride 1, padding (top, bottom, left, right);
    call only where applies() said yes (it needs the compiled kernels). None (declined) where an input value is
    inf, NaN or beyond LIMIT: the transforms would not keep it (see LIMIT)."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    pt, pb, pl, pr = padding
    oh, ow = h + pt + pb - 2, wd + pl + pr - 2
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    out = np.empty((n, o, oh, ow), np.float32)
    su = o * c + _PLANE_PAD
    u = np.empty(16 * su, np.float32)
    weights = kernel_for(_SOURCE, "weight_tiles", np, np.float32, MIN_ELEMENTS)
    tile_rows = _tile_rows_kernel()
    if tile_rows is not None:
        # the weight's tiles split by output channels, then each thread's tile rows from input to output
        parallel.run_kernel(weights, (parallel.chunks(o) if o * c >= _WEIGHT_SPLIT_PAIRS else [(0, o)]), (w, u, su))
        parts = parallel.chunks(n * th, compiled=True, flops=2.25 * 2 * 16 * o * c * n * th * tw)
        per_row = 16 * (c + o) * tw * 4  # bytes of transformed input and products per tile row
        rows = min(-(-n * th // len(parts)), max(_BLOCK_BYTES // per_row, -(-_MIN_BLOCK_TILES // tw), 1))
        size = 16 * ((c + o) * rows * tw + 2 * _PLANE_PAD)
        work = parallel.workspace(len(parts) * size, np.float32).reshape(len(parts), size)
        planes = np.zeros((len(parts), 2 * rows + 2, 2 * tw + 2), np.float32)
        ok = np.zeros((len(parts), 1), np.int64)
        parallel.run_kernel(tile_rows, parts, (sgemm.driver_address(), microkernel_address(),
                                                    transpose_address(), x, pt, pl, th, tw, u, su, out, rows,
                                                    _PLANE_PAD), parted=(work, planes, ok))
        return out if ok.all() else None
    weights(w, u, su, 0, o)
    u = _planes(u, su, o, c)
    tiles_out = kernel_for(_SOURCE, "output_tiles", np, np.float32, MIN_ELEMENTS)

    def chunk(a, b):
        for lo, hi, t, v, m, sm, ok in _input_blocks(x, pt, pl, th, tw, o, a, b):
            if not ok:
                return False
            gemm.matmul(u, v, out=_planes(m, sm, o, t))
            tiles_out(m, sm, th, tw, out[lo:hi])
        return True

    return out if all(parallel.parallel_for(n, chunk, flops=2.25 * 2 * 16 * o * c * n * th * tw)) else None


def _tile_rows_kernel():
    """conv3x3_tile_rows compiled, where Ember's GEMM driver runs here (gemm.driver_enabled()), else None."""
    if not gemm.driver_enabled() or not sgemm.driver_address():
        return None
    return kernel_for(_TILE_ROWS_KERNEL_SOURCE, "conv3x3_tile_rows", np, np.float32, MIN_ELEMENTS)


def splits_tile_rows() -> bool:
    """Whether conv3x3 runs its compiled tile-rows kernel, which splits even a single sample over the threads."""
    return _tile_rows_kernel() is not None


def weight_grad3x3(x: np.ndarray, g: np.ndarray, padding) -> np.ndarray:
    """conv2d's weight gradient, (O, C, 3, 3), for float32 input `x` and output gradient `g` (stride 1):
    the adjoint of conv3x3's algorithm, sum over tiles of (A e A^T) * (B^T d B) as 16 GEMMs, then G^T . G.
    Call only where applies() said yes. None (declined) where an input or gradient value is inf, NaN or beyond
    LIMIT."""
    n, c, _, _ = x.shape
    o, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    pt, _, pl, _ = padding
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    gw = np.empty((o, c, 3, 3), np.float32)
    from_tiles = kernel_for(_SOURCE, "weight_from_tiles", np, np.float32, MIN_ELEMENTS)
    samples = _weight_grad_kernel()
    if samples is not None:
        parts = parallel.chunks(n, compiled=True, flops=2 * 16 * o * c * n * th * tw)
        step = _samples_per_block(c, o, th * tw)
        t = min(step, -(-n // len(parts))) * th * tw  # the most tiles a block holds
        size = 16 * ((c + o) * t + 2 * _PLANE_PAD)
        work = parallel.workspace(len(parts) * size, np.float32).reshape(len(parts), size)
        totals = np.empty((len(parts), 16, o, c), np.float32)
        ok = np.zeros((len(parts), 1), np.int64)
        parallel.run_kernel(samples, parts, (sgemm.driver_address(), microkernel_address(),
                                                  transpose_address(), x, g, pt, pl, th, tw, step, _PLANE_PAD),
                                 parted=(totals, np.empty_like(totals), work,
                                         np.zeros((len(parts), 2 * th + 2, 2 * tw + 2), np.float32), ok))
        if not ok.all():
            return None
        total = totals[0]
        for p in totals[1:]:
            total += p
        from_tiles(total, gw)
        return gw
    tiles_grad = kernel_for(_SOURCE, "gradient_tiles", np, np.float32, MIN_ELEMENTS)

    def chunk(a, b):
        total = None
        for lo, hi, t, v, z, sz, ok in _input_blocks(x, pt, pl, th, tw, o, a, b):
            if not (ok and tiles_grad(g[lo:hi], th, tw, z, sz)):
                return None
            part = gemm.matmul(_planes(z, sz, o, t), v.transpose(0, 2, 1))  # (16, O, C)
            total = part if total is None else np.add(total, part, out=total)
        return total

    parts = parallel.parallel_for(n, chunk, flops=2 * 16 * o * c * n * th * tw)
    if any(p is None for p in parts):
        return None
    total = parts[0]
    for p in parts[1:]:
        total += p
    from_tiles(total, gw)
    return gw


def _weight_grad_kernel():
    """conv3x3_weight_grad_samples compiled, where Ember's GEMM driver runs here (gemm.driver_enabled()), else None."""
    if not gemm.driver_enabled() or not sgemm.driver_address():
        return None
    return kernel_for(_WEIGHT_GRAD_KERNEL_SOURCE, "conv3x3_weight_grad_samples", np, np.float32, MIN_ELEMENTS)
