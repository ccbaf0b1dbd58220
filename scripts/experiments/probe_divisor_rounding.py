"""Which reciprocal eager `y / divisor` multiplies by, per device and dtype.

ATen's true divide by a CPU scalar multiplies by a reciprocal taken on the host; where
the divisor is rounded on the way (to float? to y's dtype first?) decides the quotient's
bits whenever the divisor is not exact in y's dtype. For each dtype and divisor this
compares eager's quotients (bit for bit, NaN in the same places) with `y * inv`, rounded
once to y's dtype, for four candidate reciprocals:

* f32(1) / f32(d)            the reciprocal in float of the divisor rounded to float
* f32(1 / d)                 the reciprocal in double, rounded to float
* f32(1) / f32(T(d))         ... of the divisor first rounded to y's dtype T
* f32(1 / f64(T(d)))

and a true division by f32(d) (CPU kernels divide). Double tensors: 1 / d in double,
or a true division by d. Prints one line per case and writes JSON.

    python scripts/experiments/probe_divisor_rounding.py [--device cuda] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

DIVISORS = [2.0, 3.0, 7.25, 1e-3, 0.1, 1 / 3, 7.3, 70000.0, 1e-8, 3e38, -0.3]
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    nan = torch.isnan(b)
    return bool(torch.equal(torch.isnan(a), nan) and torch.equal(a[~nan], b[~nan]))


def candidates(divisor: float, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    f32 = torch.float32
    in_dtype = torch.tensor(divisor, dtype=dtype).item()  # the divisor rounded to y's dtype
    if dtype == torch.float64:
        return {"f64(1 / d)": torch.tensor(1.0 / divisor, dtype=torch.float64)}
    one = torch.tensor(1.0, dtype=f32)
    with torch.no_grad():
        return {"f32(1)/f32(d)": one / torch.tensor(divisor, dtype=f32),
                "f32(1/d)": torch.tensor(1.0 / divisor if divisor else float("inf"), dtype=torch.float64).to(f32),
                "f32(1)/f32(T(d))": one / torch.tensor(in_dtype, dtype=f32),
                "f32(1/f64(T(d)))": (torch.tensor(1.0, dtype=torch.float64) / in_dtype).to(f32)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out")
    args = parser.parse_args()
    dev = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    base = torch.cat([torch.randn(1 << 16, generator=gen) * 10.0 ** torch.randint(-6, 6, (1 << 16,), generator=gen),
                      torch.tensor([0.0, -0.0, 1.0, 65504.0, 6e-8, 1e-40, 3e38])])
    rows = []
    for dtype in DTYPES:
        y = base.to(dtype).to(dev)
        for d in DIVISORS:
            eager = y / d
            op_t = torch.float64 if dtype == torch.float64 else torch.float32
            match = {name: same((y.to(op_t) * inv.to(dev)).to(dtype), eager)
                     for name, inv in candidates(d, dtype).items()}
            match["y / op(d)"] = same((y.to(op_t) / torch.tensor(d, dtype=op_t, device=dev)).to(dtype), eager)
            rows.append({"dtype": str(dtype).replace("torch.", ""), "divisor": d, "matches": match})
            print(f"{dev.type} {rows[-1]['dtype']:9s} d={d!r:24} " + "  ".join(f"{k}:{'Y' if v else '-'}"
                                                                       for k, v in match.items()), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda"
                       else "cpu", "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
