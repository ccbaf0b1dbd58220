"""A model of the shared-memory cycles a k step costs an SM in gemm_tiles' one-row tiles (no GPU).

Shared memory returns 128 bytes a cycle. A warp's LDS.128 takes 4 wavefronts (a quarter-warp
each), or 2 when every lane's address equals lane l^1's or every lane's equals lane l^2's (the
uniform-pair rule); more where two addresses of a wavefront share a bank. A warp's STS.32 takes
as many cycles as the most distinct addresses on one bank. Compared against the FFMA issue a k
step needs (TM * TN per warp, 4 schedulers), this says which tiles are bound by shared memory.

    python scripts/experiments/shared_cycles.py
"""
from __future__ import annotations

BM, BN, BK, TM, TN = 192, 64, 16, 12, 4
RG, CG = BM // TM, BN // TN
T = RG * CG
SA, SB = BM + 4, BN + 4  # the wide-slab tile's shared k-row lengths (floats)


def lane_groups(tid: int, paired: bool) -> tuple[int, int]:
    """(row group, column group) of a thread: tid / CG, tid % CG, or 4 x 8 a warp with lane bit 0 the row."""
    if not paired:
        return tid // CG, tid % CG
    lane, warp = tid & 31, tid >> 5
    return (lane & 1) | ((lane >> 4) & 1) << 1 | (warp % (RG // 4)) << 2, ((lane >> 1) & 7) | (warp // (RG // 4)) << 3


def lds128_cycles(addresses: list[int]) -> int:
    """Wavefronts of one warp's 16-byte loads at these float indices."""
    if all(addresses[lane] == addresses[lane ^ 1] for lane in range(32)):
        leaders = [lane for lane in range(32) if lane % 2 == 0]
        phases = [leaders[:8], leaders[8:]]
    elif all(addresses[lane] == addresses[lane ^ 2] for lane in range(32)):
        leaders = [lane for lane in range(32) if lane & 2 == 0]
        phases = [leaders[:8], leaders[8:]]
    else:
        phases = [list(range(q * 8, q * 8 + 8)) for q in range(4)]
    cycles = 0
    for phase in phases:
        banks: dict[int, set[int]] = {}
        for lane in phase:
            for c in range(4):
                banks.setdefault((addresses[lane] + c) % 32, set()).add(addresses[lane] + c)
        cycles += max(len(s) for s in banks.values())
    return cycles


def sts32_cycles(addresses: list[int]) -> int:
    banks: dict[int, set[int]] = {}
    for a in addresses:
        banks.setdefault(a % 32, set()).add(a)
    return max(len(s) for s in banks.values())


def wide_slab(paired: bool, skewed: bool) -> tuple[int, float]:
    """(load cycles, store cycles) a k step on an SM for the register-staged wide-slab tile."""
    skew = (lambda k: k & 8) if skewed else (lambda k: 0)
    loads = stores = 0
    k = 3  # any k: the pattern repeats
    for warp in range(T // 32):
        tids = [warp * 32 + lane for lane in range(32)]
        for q in range(TM // 4):
            loads += lds128_cycles([k * SA + skew(k) + q * 4 * RG + lane_groups(t, paired)[0] * 4 for t in tids])
        for p in range(TN // 4):
            loads += lds128_cycles([k * SB + skew(k) + p * 4 * CG + lane_groups(t, paired)[1] * 4 for t in tids])
        # A slab's stores: each thread's float4 of (row, 4 k) written as 4 floats down the k-rows.
        for i in range(BM * BK // 4 // T):
            for c in range(4):
                stores += sts32_cycles([((t + i * T) % 4 * 4 + c) * SA + skew((t + i * T) % 4 * 4 + c) + (t + i * T) // 4
                                        for t in tids])
        for c in range(4):
            stores += sts32_cycles([(t % 4 * 4 + c) * SB + skew(t % 4 * 4 + c) + t // 4 for t in tids])
    return loads, stores / BK


def swizzled() -> tuple[int, float]:
    """The cp.async tile: 32-float shared rows, chunk c of row r at c ^ (r & 7); loads of 4 k, copies of 16 bytes."""
    at = lambda row, c: row * 32 + ((c ^ (row & 7)) << 2)  # noqa: E731
    loads = 0
    for warp in range(T // 32):
        tids = [warp * 32 + lane for lane in range(32)]
        for i in range(TM):
            loads += lds128_cycles([at(i * RG + lane_groups(t, True)[0], 1) for t in tids])
        for j in range(TN):
            loads += lds128_cycles([BM * 32 + at(j * CG + lane_groups(t, True)[1], 1) for t in tids])
    copies = (BM + BN) * 32 * 4 / 128  # bytes a 32-k slab, 128 a cycle
    return loads / 4, copies / 32


def main() -> None:
    ffma = T // 32 * TM * TN / 4
    # Register-staged slabs come back from global memory through the same 128 bytes a cycle.
    register_return = (BM + BN) * BK * 4 / 128 / BK
    print(f"tile {BM}x{BN}, {TM}x{TN} a thread on {T // 32} warps: FFMA issue {ffma:.0f} cycles a k on each scheduler")
    for paired in (False, True):
        for skewed in (False, True):
            loads, stores = wide_slab(paired, skewed)
            print(f"  wide slab, lanes {'paired' if paired else 'in rows '}, stores {'skewed' if skewed else 'plain '}: "
                  f"loads {loads}, stores {stores:.0f}, with the global loads' return {loads + stores + register_return:.0f}")
    loads, copies = swizzled()
    print(f"  cp.async, swizzled rows, lanes paired: loads {loads:.0f}, copies {copies:.0f}, total {loads + copies:.0f}")


if __name__ == "__main__":
    main()
