"""The peak resident memory of this process (Linux ``/proc``), without dependencies: the
benchmarks' child processes, the PECOS environment's included, measure with it."""


def peak_resident_bytes():
    """The peak resident memory (VmHWM) of this process in bytes, or None where unknown."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def reset_peak():
    """Reset the peak resident memory (VmHWM) of this process to its current size."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass
