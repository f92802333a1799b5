#!/usr/bin/env python3
"""
dev/cuda/sass_stats.py — static instruction counts of the GPU kernels, for tuning without a GPU.

Compiles SOURCE (default train_gpt.cu) to a cubin for one architecture (default sm_90) and disassembles
it with cuobjdump (NVIDIA's pip wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm hold the binaries;
they are downloaded into build/sass-tools when neither is on PATH). For each kernel whose name (without its
parameters) matches PATTERN (a regex, default: every kernel) it prints the instruction count, the tensor-core (HMMA), SFU
(MUFU), ldmatrix (LDSM), cp.async (LDGSTS) and local-memory (LDL/STL: spills) instructions, and its
longest loop (the span from a backward branch's target to the branch: an attention kernel's key loop) with the
instructions per HMMA in it. An SM sub-partition issues one instruction a clock and retires an m16n8k16 HMMA every
~4 clocks at the tensor cores' peak, so a loop above ~4 instructions per HMMA is bound by issue, not the tensor
cores. These are static figures: what a kernel executes per tile depends on its branches, and time on much more;
they compare versions of one kernel, not kernels with each other.
--limits FILE: a test instead (make test-sass-issue): FILE's lines are "KERNEL MAX" (the kernel's name without its
parameters, then the most instructions per HMMA its longest loop may have; '#' starts a comment); one "ok"/"FAIL" line per kernel, then
"N passed, M failed", exit status 1 on any failure (a missing kernel, or tools that cannot be had, fail too).
Usage: dev/cuda/sass_stats.py [--arch sm_90] [--source train_gpt.cu] [--limits FILE] [PATTERN]   (make sass-stats)
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "build", "sass-tools")
COUNTED = ["HMMA", "MUFU", "LDSM", "LDGSTS", "LDL", "STL"]


class ToolError(Exception):
    pass


def tools_path():
    """a PATH on which cuobjdump and nvdisasm are found, downloading NVIDIA's wheels if needed (ToolError if not)"""
    path = os.environ.get("PATH", "")
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return path
    found = glob.glob(os.path.join(TOOLS, "nvidia", "*", "bin"))
    if not found:
        os.makedirs(TOOLS, exist_ok=True)
        if subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", TOOLS,
                           "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"]).returncode != 0:
            raise ToolError("cuobjdump and nvdisasm are not on PATH, and pip cannot download the wheels "
                            "nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm")
        for wheel in glob.glob(os.path.join(TOOLS, "*.whl")):
            subprocess.run([sys.executable, "-m", "zipfile", "-e", wheel, TOOLS], check=True)
        found = glob.glob(os.path.join(TOOLS, "nvidia", "*", "bin"))
    for d in found:
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o755)
    return os.pathsep.join(found + [path])


def kernels(sass):
    """{mangled name: [(address, opcode, operands, guarded by a predicate)]} from cuobjdump -sass output"""
    out, name = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?);", line)
        if m and name:
            out[name].append((int(m.group(1), 16), m.group(3).split(".")[0], m.group(4), m.group(2) is not None))
    return out


def longest_loop(code):
    """(instructions, HMMA) from a backward branch's target to the branch, for the branch with the most instructions.
    A span holding an unconditional EXIT is no loop: ptxas puts the slow paths of warp-divergent instructions
    (BRA.DIV's targets) after the kernel's end, and they branch back into the body."""
    best = (0, 0)
    for address, op, operands, _ in code:
        target = re.search(r"0x([0-9a-f]+)", operands) if op == "BRA" else None
        if target and int(target.group(1), 16) < address:
            span = [(o, guarded) for a, o, _, guarded in code if int(target.group(1), 16) <= a <= address]
            if ("EXIT", False) not in span:
                best = max(best, (len(span), sum(1 for o, _ in span if o == "HMMA")))
    return best


def ratio_text(loop):
    """a loop's instructions per HMMA, two decimals ('-' without HMMA)"""
    return f"{loop[0] / loop[1]:.2f}" if loop[1] else "-"


def stats(args):
    """[(kernel name without parameters, SASS)] of the kernels of args.source (ToolError if it cannot be had)"""
    env = dict(os.environ, PATH=tools_path())
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        build = subprocess.run([os.environ.get("NVCC", "nvcc"), "-std=c++17", "-O3", "-I", ROOT, f"-arch={args.arch}", "-cubin",
                                "-Xcompiler", "-fopenmp", "-o", cubin, os.path.join(ROOT, args.source)])
        if build.returncode != 0:
            raise ToolError(f"nvcc -arch={args.arch} -cubin {args.source} failed")
        sass = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True, env=env).stdout
    code_of = kernels(sass)
    mangled = list(code_of)
    names = subprocess.run(["c++filt"], input="\n".join(mangled), check=True, capture_output=True, text=True).stdout.splitlines()
    shorts = [re.sub(r"\(.*", "", name).replace("void ", "") for name in names]
    return sorted((short, code_of[m]) for short, m in zip(shorts, mangled))


def check(args):
    """the --limits test: each listed kernel's longest loop within its instructions per HMMA"""
    limits = []
    for line in open(args.limits):
        line = line.split("#")[0].strip()
        if line:
            name, limit = line.rsplit(None, 1)
            limits.append((name, float(limit)))
    passed = failed = 0
    try:
        loop_of = {short: longest_loop(code) for short, code in stats(args)}
    except (ToolError, subprocess.CalledProcessError, OSError) as e:
        print(f"FAIL  {args.source}, {args.arch}: no SASS to count: {e}")
        loop_of, failed = None, 1
    for name, limit in limits if loop_of is not None else []:
        loop = loop_of.get(name)
        if loop is None:
            print(f"FAIL  {name}: no such kernel in {args.source} ({args.arch})")
            failed += 1
        elif loop[1] and loop[0] / loop[1] <= limit:
            print(f"ok    {name}: key loop {loop[0]} instructions / {loop[1]} HMMA = {ratio_text(loop)} <= {limit:.2f} ({args.arch})")
            passed += 1
        else:
            print(f"FAIL  {name}: key loop {loop[0]} instructions / {loop[1]} HMMA = {ratio_text(loop)} > {limit:.2f} ({args.arch})")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--source", default="train_gpt.cu")
    ap.add_argument("--limits", help="test each kernel FILE lists against its most instructions per HMMA")
    ap.add_argument("pattern", nargs="?", default=".")
    args = ap.parse_args()
    if args.limits:
        return check(args)
    try:
        kernel_code = stats(args)
    except ToolError as e:
        sys.exit(f"error: {e}")
    print(f"{args.source}, {args.arch}: static SASS per kernel (instructions; longest loop: its instructions, HMMA, "
          "instructions per HMMA)")
    print(f"{'kernel':64s} {'instr':>6s} " + " ".join(f"{c:>6s}" for c in COUNTED) + f" {'loop':>6s} {'HMMA':>6s} {'/HMMA':>6s}")
    for short, code in kernel_code:
        if not re.search(args.pattern, short):
            continue
        counts = collections.Counter(op for _, op, _, _ in code)
        loop = longest_loop(code)
        print(f"{short[:64]:64s} {len(code):6d} " + " ".join(f"{counts[c]:6d}" for c in COUNTED) +
              f" {loop[0]:6d} {loop[1]:6d} {ratio_text(loop):>6s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
