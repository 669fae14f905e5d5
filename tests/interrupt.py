"""interrupt.py [--no-output] GPUSIM ARGS... - a Ctrl-C as a terminal sends it, to a gpusim that
runs a program.

gpusim ARGS runs in a session of its own; a second after it starts, SIGINT goes to its whole
process group (gpusim and the program it runs, as a terminal's Ctrl-C does). Exit 0 when gpusim
then ends by that signal within 20 s (it removed what it made, then let the signal act), 1
otherwise; with --no-output, also 1 when gpusim wrote anything on its standard output (a verdict
drawn after the interrupt). The tests check what it left behind (test_predict.sh,
test_verify.sh).
"""
import os
import signal
import subprocess
import sys
import time

args = sys.argv[1:]
no_output = args[:1] == ["--no-output"]
if no_output:
    args = args[1:]
p = subprocess.Popen(args, start_new_session=True,
                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
time.sleep(1)
os.killpg(p.pid, signal.SIGINT)
try:
    out, _ = p.communicate(timeout=20)
except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    sys.exit("interrupt.py: gpusim still ran 20 s after a SIGINT")
if p.returncode != -signal.SIGINT:
    sys.exit(f"interrupt.py: gpusim ended with {p.returncode}, not by SIGINT ({-signal.SIGINT})")
if no_output and out:
    sys.exit(f"interrupt.py: gpusim wrote after the interrupt: {out[:200]!r}")
