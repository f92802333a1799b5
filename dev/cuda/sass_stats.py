#!/usr/bin/env python3
"""
dev/cuda/sass_stats.py — static instruction counts of the GPU kernels, for tuning without a GPU.

Compiles SOURCE (default train_gpt.cu) to a cubin for one architecture (default sm_90) and disassembles
it with cuobjdump (NVIDIA's pip wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm hold the binaries;
they are downloaded into build/sass-tools when neither is on PATH). For each kernel whose name (without its
parameters) matches PATTERN (a regex, default: every kernel) it prints the instruction count, the tensor-core (HMMA), SFU
(MUFU), ldmatrix (LDSM), cp.async (LDGSTS) and local-memory (LDL/STL: spills) instructions, and its
longest loop: the span from a backward branch's target to the branch. These are static figures: what a
kernel executes per tile depends on its branches, and time on much more; they compare versions of one
kernel, not kernels with each other.
Usage: dev/cuda/sass_stats.py [--arch sm_90] [--source train_gpt.cu] [PATTERN]   (make sass-stats)
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


def tools_path():
    """a PATH on which cuobjdump and nvdisasm are found, downloading NVIDIA's wheels if needed"""
    path = os.environ.get("PATH", "")
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return path
    found = glob.glob(os.path.join(TOOLS, "nvidia", "*", "bin"))
    if not found:
        os.makedirs(TOOLS, exist_ok=True)
        if subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", TOOLS,
                           "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"]).returncode != 0:
            sys.exit("error: cuobjdump and nvdisasm are not on PATH, and pip cannot download the wheels "
                     "nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm")
        for wheel in glob.glob(os.path.join(TOOLS, "*.whl")):
            subprocess.run([sys.executable, "-m", "zipfile", "-e", wheel, TOOLS], check=True)
        found = glob.glob(os.path.join(TOOLS, "nvidia", "*", "bin"))
    for d in found:
        for f in os.listdir(d):
            os.chmod(os.path.join(d, f), 0o755)
    return os.pathsep.join(found + [path])


def kernels(sass):
    """{mangled name: [(address, opcode, operands)]} from cuobjdump -sass output"""
    out, name = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?);", line)
        if m and name:
            out[name].append((int(m.group(1), 16), m.group(2).split(".")[0], m.group(3)))
    return out


def longest_loop(code):
    """instructions from a backward branch's target to the branch, the most of any such branch"""
    best = 0
    for address, op, operands in code:
        target = re.search(r"0x([0-9a-f]+)", operands) if op == "BRA" else None
        if target and int(target.group(1), 16) < address:
            best = max(best, sum(1 for a, _, _ in code if int(target.group(1), 16) <= a <= address))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--source", default="train_gpt.cu")
    ap.add_argument("pattern", nargs="?", default=".")
    args = ap.parse_args()
    env = dict(os.environ, PATH=tools_path())
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        subprocess.run([os.environ.get("NVCC", "nvcc"), "-std=c++17", "-O3", "-I", ROOT, f"-arch={args.arch}", "-cubin",
                        "-Xcompiler", "-fopenmp", "-o", cubin, os.path.join(ROOT, args.source)], check=True)
        sass = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True, env=env).stdout
    code_of = kernels(sass)
    mangled = list(code_of)
    names = subprocess.run(["c++filt"], input="\n".join(mangled), check=True, capture_output=True, text=True).stdout.splitlines()
    print(f"{args.source}, {args.arch}: static SASS per kernel (instructions; longest loop: instructions in it)")
    print(f"{'kernel':64s} {'instr':>6s} " + " ".join(f"{c:>6s}" for c in COUNTED) + f" {'loop':>6s}")
    shorts = [re.sub(r"\(.*", "", name).replace("void ", "") for name in names]
    for short, m in sorted(zip(shorts, mangled)):
        if not re.search(args.pattern, short):
            continue
        code = code_of[m]
        counts = collections.Counter(op for _, op, _ in code)
        print(f"{short[:64]:64s} {len(code):6d} " + " ".join(f"{counts[c]:6d}" for c in COUNTED) + f" {longest_loop(code):6d}")


if __name__ == "__main__":
    main()
