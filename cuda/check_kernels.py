#!/usr/bin/env python3
"""The gate `make cuda` runs after nvcc: every kernel's resources and instructions against its budget.

usage: check_kernels.py BUDGETS PTXAS_LOG... KEEP_DIR

From each ptxas report (nvcc -Xptxas -v) it takes, per kernel and architecture, the registers, static
shared memory and spill traffic; from the compute_90 PTX nvcc kept (--keep) it takes each kernel's body.
BUDGETS has one line per kernel pattern:

    pattern        registers  shared_bytes  instructions
    kvl_finite_kernel<float>   24   0   vote.sync.ballot

A pattern is a shell glob over the kernel's name as C++ spells it (template arguments included, spaces
and "(anonymous namespace)::" removed); the first line that matches a kernel is its budget, and a kernel
no line matches fails. instructions is a comma-separated list of PTX mnemonics that must appear in the
kernel's compute_90 body ("-" for none). A kernel fails on any spill, more registers or shared memory
than its budget, or a missing instruction. Python 3 standard library only; c++filt (binutils)
demangles the names.
"""
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys


def demangle(names):
    """mangled → C++ spelling, through c++filt when it is installed"""
    names = sorted(set(names))
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def key_of(spelling):
    """'void (anonymous namespace)::k<a, b>(int*)' → 'k<a,b>'"""
    s = spelling.replace("(anonymous namespace)::", "")
    if s.startswith("void "):
        s = s[5:]
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            s = s[:i]
            break
    return s.replace(" ", "")


def read_budgets(path):
    budgets = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 4:
                sys.exit(f"{path}:{n}: expected: pattern registers shared_bytes instructions")
            pattern, regs, smem, instr = parts
            need = [] if instr == "-" else instr.split(",")
            budgets.append((pattern, int(regs), int(smem), need))
    return budgets


ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def read_ptxas(paths):
    """{(mangled, arch): {regs, smem, stack, spills}}"""
    kernels = {}
    for path in paths:
        current = None
        with open(path) as f:
            for line in f:
                m = ENTRY.search(line)
                if m:
                    current = (m.group(1), m.group(2))
                    kernels[current] = {"regs": 0, "smem": 0, "stack": 0, "spills": 0}
                    continue
                if current is None:
                    continue
                m = SPILL.search(line)
                if m:
                    kernels[current]["stack"] = int(m.group(1))
                    kernels[current]["spills"] = int(m.group(2)) + int(m.group(3))
                m = USED.search(line)
                if m:
                    kernels[current]["regs"] = int(m.group(1))
                    kernels[current]["smem"] = int(m.group(2) or 0)
    return kernels


def read_ptx_bodies(keep_dir):
    """{mangled: PTX text of its .entry} from every compute_90 PTX file below keep_dir"""
    bodies = {}
    for path in glob.glob(os.path.join(keep_dir, "**", "*.compute_90.ptx"), recursive=True):
        with open(path) as f:
            text = f.read()
        for m in re.finditer(r"\.entry\s+(\S+)\s*\(", text):
            end = text.find("\n}", m.end())
            bodies[m.group(1)] = text[m.start():end if end >= 0 else len(text)]
    return bodies


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    budgets = read_budgets(argv[0])
    kernels = read_ptxas(argv[1:-1])
    bodies = read_ptx_bodies(argv[-1])
    names = demangle([k[0] for k in kernels] + list(bodies))
    failures = 0
    print(f"{'kernel':58} {'arch':6} {'regs':>9} {'smem':>11} {'spill':>5}  instructions")
    for (mangled, arch), r in sorted(kernels.items(), key=lambda kv: (key_of(names[kv[0][0]]), kv[0][1])):
        key = key_of(names[mangled])
        budget = next((b for b in budgets if fnmatch.fnmatchcase(key, b[0])), None)
        problems = []
        if budget is None:
            problems.append("no budget in " + argv[0])
            regs_b, smem_b, need = "-", "-", []
        else:
            _, regs_b, smem_b, need = budget
            if r["regs"] > regs_b:
                problems.append(f"{r['regs']} registers > {regs_b}")
            if r["smem"] > smem_b:
                problems.append(f"{r['smem']} B shared > {smem_b}")
        if r["spills"]:
            problems.append(f"{r['spills']} B spilled")
        missing = []
        if arch == "sm_90":
            body = bodies.get(mangled, "")
            missing = [i for i in need if i not in body]
            if missing:
                problems.append("PTX lacks " + ", ".join(missing))
        instr = ",".join(need) if (need and arch == "sm_90") else ""
        print(f"{key[:58]:58} {arch:6} {r['regs']:>4}/{regs_b!s:<4} {r['smem']:>5}/{smem_b!s:<5} {r['spills']:>5}  "
              f"{instr}{'  FAIL: ' + '; '.join(problems) if problems else ''}")
        failures += bool(problems)
    if not kernels:
        print("no kernels found in the ptxas reports")
        return 1
    print(f"cuda: {len(kernels)} kernel builds checked, {failures} over budget")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
