#!/usr/bin/env python3
"""
dev/cuda/check_occupancy.py — checks that each kernel of a build fits the blocks an SM its source asks for.

Reads ptxas's resource report (-Xptxas -v: registers and static shared memory of each entry) and the PTX that
ptxas assembled (nvcc -keep), whose .maxntid and .minnctapersm directives are the kernel's __launch_bounds__(threads,
blocks). A kernel with both is checked at `blocks` blocks of `threads` threads, one with .maxntid alone at one block,
one without launch bounds at one block of one warp (no intent stated). For each:
  registers: ⌈registers·32 / 256⌉·256 a warp (the allocation unit) × warps × blocks <= 65536, registers <= 255;
  threads:   threads × blocks <= 2048, blocks <= 32;
  shared:    static <= 48 KiB, static + dynamic <= the block's opt-in limit, and
             blocks × (static + dynamic, rounded up to 128 bytes, + the 1 KiB each block reserves) <= the SM's.
ptxas does not see the dynamic shared memory a launch asks for: for a kernel that states its blocks and uses dynamic
shared memory, DYNAMIC_SMEM below gives the most the host asks for; such a kernel without an entry, and an entry
that names no kernel of the build, fail. Dynamic shared memory of the other kernels is not checked (one block: the
launch itself fails if it does not fit).
Usage: check_occupancy.py ARCH PTX < PTXAS_REPORT    (ARCH 80 or 90; test_nvcc_gpu.sh runs it on each build of the
trainer). Prints what it checked on one line and exits 0, or prints each problem and exits 1.
"""
import re
import subprocess
import sys

# per SM: shared memory, a block's opt-in maximum of shared memory, 32-bit registers, resident threads and blocks
SM = {
    80: {"smem": 167936, "optin": 166912, "regs": 65536, "threads": 2048, "blocks": 32},
    90: {"smem": 233472, "optin": 232448, "regs": 65536, "threads": 2048, "blocks": 32},
}
RESERVED_SMEM = 1024  # bytes of shared memory the CUDA runtime reserves in each block (sm_80 and later)
STATIC_SMEM_MAX = 48 * 1024
REG_UNIT = 256  # registers are allocated a warp at a time, in units of 256

# The most dynamic shared memory a block asks for, by kernel name (demangled, up to the given prefix of its template
# arguments): a function of the SM (SM[arch] and "arch") and the kernel's blocks an SM; None where the kernel does
# not run on that architecture.
DYNAMIC_SMEM = {
    # classifier_cached_columns: an SM's share a block (CLASSIFIER_MIN_BLOCKS), at most the opt-in, less 2 KiB
    "fused_classifier_kernel": lambda sm, blocks: min(sm["smem"] // blocks, sm["optin"]) - 2048,
    # layernorm_backward_fusable: the fused column sums only when they take at most an SM's share of LN_BWD_BLOCKS (4)
    # blocks, less 1 KiB
    "layernorm_backward_kernel<": lambda sm, blocks: sm["smem"] // 4 - 1024,
    # fa_forward_smem<HD, MT>: (MT + 4)·64·(HD + 8) bf16
    "flash_attention_forward_kernel<128, 2,": lambda sm, blocks: 104448,
    # FaBackwardSmem<HD, MT>: bytes + ds_bytes (the atomic mode's dSᵀ tile)
    "flash_attention_backward_kv_kernel<128, 1,": lambda sm, blocks: 114688,
    # head dim 256 (flash_attention_smem_bytes: 202752 bytes for the dQ kernel) exceeds an A100's opt-in: the trainer
    # refuses it there
    "flash_attention_forward_kernel<256, 1,": lambda sm, blocks: 168960 if sm["arch"] >= 90 else None,
    "flash_attention_backward_kv_kernel<256, 1,": lambda sm, blocks: 144896 if sm["arch"] >= 90 else None,
}


def ptxas_report(text, arch):
    """{mangled entry: (registers, static shared bytes)} from ptxas -v output for sm_ARCH"""
    kernels, entry = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\S+)' for 'sm_(\d+)'", line)
        if m:
            entry = m.group(1)
            if int(m.group(2)) != arch:
                sys.exit(f"error: the report is for sm_{m.group(2)}, not sm_{arch}")
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and entry:
            smem = re.search(r"(\d+) bytes smem", line)
            kernels[entry] = (int(m.group(1)), int(smem.group(1)) if smem else 0)
            entry = None
    return kernels


def ptx_entries(text):
    """{mangled entry: (maxntid threads or None, minnctapersm blocks or None, uses dynamic shared memory)}"""
    dynamic = re.findall(r"^\.extern \.shared .*?(\w+)\[\];", text, re.M)
    entries = {}
    for m in re.finditer(r"^\.(?:visible |weak )?\.entry (\w+)\((.*?)^\{(.*?)^\}", text, re.M | re.S):
        head, body = m.group(2), m.group(3)
        ntid = re.search(r"^\.(?:maxntid|reqntid) (\d+), (\d+), (\d+)", head, re.M)
        ncta = re.search(r"^\.minnctapersm (\d+)", head, re.M)
        threads = int(ntid.group(1)) * int(ntid.group(2)) * int(ntid.group(3)) if ntid else None
        entries[m.group(1)] = (threads, int(ncta.group(1)) if ncta else None, any(re.search(rf"\b{d}\b", body) for d in dynamic))
    return entries


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), check=True, capture_output=True, text=True).stdout.splitlines()
    return {n: re.sub(r"^void |\(.*$", "", d) for n, d in zip(names, out)}


def check(arch, report, entries):
    """(problems, summary)"""
    sm = dict(SM[arch], arch=arch)
    problems = []
    for name in sorted(set(report) ^ set(entries)):
        problems.append(f"{name}: in the {'ptxas report' if name in report else 'PTX'} only")
    names = demangle(sorted(report))
    used_tables, bounded, thread_only, unbounded, not_run = set(), 0, 0, 0, 0
    for mangled in sorted(report, key=lambda n: names[n]):
        if mangled not in entries:
            continue
        name, (regs, static), (threads, blocks, dynamic_use) = names[mangled], report[mangled], entries[mangled]
        stated = threads is not None and blocks is not None
        if threads is None:
            unbounded += 1
            threads, blocks = 32, 1
        elif blocks is None:
            thread_only += 1
            blocks = 1
        else:
            bounded += 1
        dynamic = 0
        if dynamic_use and stated:
            keys = [k for k in DYNAMIC_SMEM if name.startswith(k)]
            if len(keys) != 1:
                problems.append(f"{name}: {blocks} blocks an SM and dynamic shared memory, "
                                f"{'no entry' if not keys else 'several entries'} in DYNAMIC_SMEM")
                continue
            used_tables.add(keys[0])
            dynamic = DYNAMIC_SMEM[keys[0]](sm, blocks)
            if dynamic is None:
                not_run += 1
                continue
        warp_regs = -(-regs * 32 // REG_UNIT) * REG_UNIT
        warps = -(-threads // 32)
        block_smem = -(-(static + dynamic) // 128) * 128 + RESERVED_SMEM
        what = f"{threads} threads x {blocks} blocks"
        if regs > 255:
            problems.append(f"{name}: {regs} registers > 255")
        if warp_regs * warps * blocks > sm["regs"]:
            problems.append(f"{name}: registers {regs} ({warp_regs} a warp) x {what} = {warp_regs * warps * blocks} > {sm['regs']}")
        if threads * blocks > sm["threads"]:
            problems.append(f"{name}: {what} = {threads * blocks} threads > {sm['threads']}")
        if blocks > sm["blocks"]:
            problems.append(f"{name}: {blocks} blocks > {sm['blocks']}")
        if static > STATIC_SMEM_MAX:
            problems.append(f"{name}: {static} bytes of static shared memory > {STATIC_SMEM_MAX}")
        if static + dynamic > sm["optin"]:
            problems.append(f"{name}: shared memory {static} static + {dynamic} dynamic > {sm['optin']} a block")
        if block_smem * blocks > sm["smem"]:
            problems.append(f"{name}: shared memory ({static} static + {dynamic} dynamic + {RESERVED_SMEM} reserved) x "
                            f"{blocks} blocks = {block_smem * blocks} > {sm['smem']}")
    for key in sorted(set(DYNAMIC_SMEM) - used_tables):
        problems.append(f"DYNAMIC_SMEM entry '{key}' names no kernel of the build that states its blocks and uses dynamic shared memory")
    summary = (f"{len(report)} kernels checked: {bounded} at their __launch_bounds__ blocks an SM (dynamic shared memory of "
               f"{len(used_tables)} table entries{f'; {not_run} of them not run on sm_{arch}' if not_run else ''}), "
               f"{thread_only} at one block of their bound's threads, {unbounded} without launch bounds at one block of a warp")
    if not report:
        problems.append("no kernel in the ptxas report")
    return problems, summary


def main():
    if len(sys.argv) != 3 or not sys.argv[1].isdigit() or int(sys.argv[1]) not in SM:
        sys.exit("usage: " + __doc__.strip().split("Usage: ")[1])
    arch = int(sys.argv[1])
    with open(sys.argv[2]) as f:
        entries = ptx_entries(f.read())
    problems, summary = check(arch, ptxas_report(sys.stdin.read(), arch), entries)
    print("\n".join(problems) if problems else summary)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
