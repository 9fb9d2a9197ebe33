"""Helpers shared by the project's benchmark scripts: ports, waiting, and CPU accounting."""
import os
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def cpu_seconds(pid, children=True):
    """User plus system CPU seconds of a process (and its live children)."""
    hz = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    if children:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
        pids += [int(p) for p in out.split()]
    total = 0.0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / hz
        except (OSError, IndexError, ValueError):
            pass
    return total
