#!/usr/bin/env python3
"""Sample the CPU time of a process and all its descendants once a second
until it exits: one line per sample, "unix_time_s cpu_s" (user + system,
of the live processes; a child that exited drops out of the sum, so the
series can step down). bench-aiperf.sh runs it beside aiperf, whose worker,
record processor and timing services are separate processes, to tell its
CPU during the profiling window from its start-up's.

    tree_cpu.py PID OUT
"""
import os
import sys
import time

TCK = os.sysconf("SC_CLK_TCK")


def snapshot():
    kids, cpu = {}, {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        pid, ppid = int(p), int(fields[1])
        kids.setdefault(ppid, []).append(pid)
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TCK
    return kids, cpu


def tree_cpu(root):
    kids, cpu = snapshot()
    total, todo = 0.0, [root]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo += kids.get(p, [])
    return total


def main():
    root, out = int(sys.argv[1]), sys.argv[2]
    deadline = time.time() + 3600  # bounded: an hour at most
    with open(out, "w") as f:
        while os.path.exists(f"/proc/{root}") and time.time() < deadline:
            f.write(f"{time.time():.3f} {tree_cpu(root):.2f}\n")
            f.flush()
            time.sleep(1)


if __name__ == "__main__":
    main()
